// CoordinatorMetrics: the coordinator's Prometheus series, behind plain methods so the domain
// classes stay free of prometheus-cpp headers. Names (pipetrain_ prefix, base units, counters
// end in _total; labels job_id/rank/state/kind (job_id, not job: Prometheus reserves `job` for the
// scrape job), and method for RPC errors):
//   pipetrain_jobs{state}                                  gauge: jobs per state (lower-case state name)
//   pipetrain_jobs_submitted_total                         counter
//   pipetrain_job_steps_total{job_id}                      counter: completed steps
//   pipetrain_job_step_duration_seconds{job_id}            gauge: the last completed step
//   pipetrain_job_predicted_step_seconds{job_id}           gauge: the plan's predicted step (makespan)
//   pipetrain_job_loss{job_id}                             gauge: the last step's loss
//   pipetrain_job_grad_norm{job_id}                        gauge: the last step's global gradient
//                                                          norm, before clipping
//   pipetrain_job_clipped_steps_total{job_id}              counter: steps whose gradients were
//                                                          scaled down (clip_grad_norm)
//   pipetrain_job_tokens_per_second{job_id}                gauge
//   pipetrain_job_bubble_ratio{job_id,kind}                gauge: kind="predicted" | "measured";
//                                                          per stage (the papers' number)
//   pipetrain_job_step_bubble_ratio{job_id,kind}           gauge: predicted | measured; 1 -
//                                                          compute / (workers x step time)
//   pipetrain_worker_peak_activation_bytes{job_id,rank,kind} gauge: predicted | measured
//   pipetrain_worker_device_peak_bytes{job_id,rank}        gauge: all memory the allocator held
//   pipetrain_workers{state}                               gauge: idle | busy | lost
//   pipetrain_worker_heartbeats_total                      counter
//   pipetrain_coordinator_rpc_errors_total{method}         counter: RPCs answered with a non-OK status
//   pipetrain_job_recoveries_total{job_id}                 counter: times the job went RECOVERING
//   pipetrain_job_checkpoint_step{job_id}                  gauge: newest complete checkpoint step
// The numbers users compare (docs/training.md, "Metrics"):
//   pipetrain_job_model_flops_per_second{job_id}           gauge: the last step's model FLOP/s
//   pipetrain_job_mfu_ratio{job_id}                        gauge: that / the job's peak (absent
//                                                          while the peak is unknown)
//   pipetrain_job_peak_flops_per_second{job_id}            gauge: the job's workers' peak (absent
//                                                          when unknown)
//   pipetrain_job_mean_tokens_per_second{job_id}           gauge: over every step run so far
//   pipetrain_job_mean_model_flops_per_second{job_id}      gauge: the same
//   pipetrain_job_mean_mfu_ratio{job_id}                   gauge: the same (absent when unknown)
//   pipetrain_job_learning_rate{job_id}                    gauge: the last step's rate
//   pipetrain_job_skipped_steps_total{job_id}              counter: updates skipped (non-finite
//                                                          gradients)
//   pipetrain_job_validation_loss{job_id}                  gauge: the newest validation pass
//   pipetrain_job_validation_perplexity{job_id}            gauge: exp of it
//   pipetrain_job_validation_step{job_id}                  gauge: completed steps at that pass
//
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic; family lookups are locked).
#ifndef PIPETRAIN_COORDINATOR_METRICS_H_
#define PIPETRAIN_COORDINATOR_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "pipetrain/v1/job.pb.h"
#include "pipetrain/v1/plan.pb.h"

namespace prometheus {
class Registry;
}

namespace pipetrain::coordinator {

// "queued", "waiting_for_workers", ... (the enum name without JOB_STATE_, lower case).
std::string JobStateLabel(v1::JobState state);

class CoordinatorMetrics {
 public:
  CoordinatorMetrics();
  ~CoordinatorMetrics();
  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // For an Exposer to serve.
  std::shared_ptr<prometheus::Registry> registry() const;

  void JobSubmitted();
  // `from` JOB_STATE_UNSPECIFIED: a job appeared (submitted or loaded from the store).
  void JobStateChanged(v1::JobState from, v1::JobState to);
  // Predicted step time, bubble and peak activation bytes per rank.
  void JobPlanned(const std::string& job_id, const v1::Prediction& prediction);
  // After a completed step: the job's measurements as aggregated.
  void JobStep(const v1::Job& job);
  void SetWorkerCounts(int idle, int busy, int lost);
  void Heartbeat();
  void RpcError(const std::string& method);
  void JobRecovering(const std::string& job_id);
  void JobCheckpointed(const std::string& job_id, int64_t step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_METRICS_H_
