// CoordinatorMetrics: the coordinator's Prometheus series, behind plain methods so the domain
// classes stay free of prometheus-cpp headers. Names: pipetrain_ prefix, base units, counters
// end in _total. Labels: job_id (not job: Prometheus reserves `job` for the scrape job), rank,
// state, kind ("predicted" | "measured"), method. docs/metrics.md lists every series of both
// daemons with its meaning; the coordinator's:
//   pipetrain_jobs{state}                                  gauge: jobs per state (lower-case state name)
//   pipetrain_jobs_submitted_total                         counter
//   pipetrain_workers{state}                               gauge: idle | busy | lost
//   pipetrain_worker_heartbeats_total                      counter: heartbeats received
//   pipetrain_coordinator_rpc_errors_total{method}         counter: RPCs answered with a non-OK status
// Per job (removed a retention after the job ends, see "Per-job series" below):
//   pipetrain_job_state{job_id,state}                      gauge: 1 for the job's current state,
//                                                          0 for states it left
//   pipetrain_job_steps_total{job_id}                      counter: completed steps
//   pipetrain_job_step_duration_seconds{job_id}            gauge: the last completed step
//   pipetrain_job_step_seconds{job_id}                     histogram: every completed step
//                                                          (the slowest rank's duration)
//   pipetrain_job_predicted_step_seconds{job_id}           gauge: the plan's predicted step (makespan)
//   pipetrain_job_loss{job_id}                             gauge: the last step's loss
//   pipetrain_job_grad_norm{job_id}                        gauge: the last step's global gradient
//                                                          norm, before clipping
//   pipetrain_job_clipped_steps_total{job_id}              counter: steps whose gradients were
//                                                          scaled down (clip_grad_norm)
//   pipetrain_job_tokens_per_second{job_id}                gauge
//   pipetrain_job_bubble_ratio{job_id,kind}                gauge: per stage (the papers' number)
//   pipetrain_job_step_bubble_ratio{job_id,kind}           gauge: 1 - compute / (workers x step)
//   pipetrain_job_rank_bubble_ratio{job_id,rank,kind}      gauge: 1 - the rank's compute / step
//                                                          time; the mean over ranks is the step
//                                                          bubble (schedule/bubble.h)
//   pipetrain_job_peak_activation_bytes{job_id,rank,kind}  gauge: predicted | measured (max over
//                                                          steps)
//   pipetrain_job_device_peak_bytes{job_id,rank}           gauge: all memory the allocator held
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
// The registry also carries what the daemon adds through registry(): pipetrain_build_info and
// the gRPC server series (common/build_info.h, common/grpc_server_metrics.h).
//
// Per-job series: a job's series appear when it is submitted (or found unfinished in the store
// at start-up) and are removed `retention` after it ends (SUCCEEDED, FAILED, CANCELLED), at the
// first scrape after that (common/job_series.h). Jobs that had already ended when the
// coordinator started get none.
//
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic; family lookups are locked).
// The job manager makes a job's calls in order, under its lock.
#ifndef PIPETRAIN_COORDINATOR_METRICS_H_
#define PIPETRAIN_COORDINATOR_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/job_series.h"
#include "pipetrain/v1/job.pb.h"
#include "pipetrain/v1/plan.pb.h"

namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus

namespace pipetrain::coordinator {

// "queued", "waiting_for_workers", ... (the enum name without JOB_STATE_, lower case).
std::string JobStateLabel(v1::JobState state);

class CoordinatorMetrics {
 public:
  // `job_series`: how long a job's series stay after it ends, and the clock that says when.
  explicit CoordinatorMetrics(JobSeriesOptions job_series = {});
  ~CoordinatorMetrics();
  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // For an Exposer to serve: removes expired jobs' series, then collects everything.
  std::shared_ptr<prometheus::Collectable> collectable() const;
  // For other series on the same endpoint (build info, gRPC server metrics).
  prometheus::Registry& registry();

  void JobSubmitted();
  // `from` JOB_STATE_UNSPECIFIED: a job appeared (submitted or loaded from the store; one loaded
  // already ended gets no per-job series). A terminal `to` starts the job's retention.
  void JobStateChanged(const std::string& job_id, v1::JobState from, v1::JobState to);
  // Predicted step time, bubbles (of the step, per stage, per rank) and peak activation bytes
  // per rank.
  void JobPlanned(const std::string& job_id, const v1::Prediction& prediction);
  // After a completed step: the job's measurements as aggregated, and the step's bubble per
  // rank (empty: the step came without timings).
  void JobStep(const v1::Job& job, const std::vector<double>& rank_bubbles = {});
  void SetWorkerCounts(int idle, int busy, int lost);
  void Heartbeat();
  void RpcError(const std::string& method);
  void JobRecovering(const std::string& job_id);
  void JobCheckpointed(const std::string& job_id, int64_t step);

  // Jobs whose series are exported now (ended ones until their retention passes), in id order.
  std::vector<std::string> JobsWithSeries() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_METRICS_H_
