// WorkerMetrics: the worker daemon's Prometheus series, updated after every step. The Exposer
// that serves them is created by the daemon. Series of a job carry its job_id and this worker's
// rank in it, the labels the coordinator's per-job series use, so a worker's panel can be tied
// to a job and rank, and the data-parallel replica the rank belongs to (rank = replica x
// pipeline ranks + pipeline rank; replica 0 without data parallelism), so a dashboard can group
// a job's workers by replica:
//   pipetrain_worker_steps_total{job_id,rank,replica}            counter: steps completed here
//   pipetrain_worker_step_duration_seconds{job_id,rank,replica}  gauge: the last step
//   pipetrain_worker_step_seconds{job_id,rank,replica}           histogram: every step
//   pipetrain_worker_peak_activation_bytes{job_id,rank,replica}  gauge: the last step's peak
//   pipetrain_worker_device_peak_bytes{job_id,rank,replica}      gauge: the last step's device
//                                                                allocator peak
//   pipetrain_worker_loss{job_id,rank,replica}                   gauge: the last step's loss
//                                                                (the rank holding the last stage)
//   pipetrain_worker_transfer_bytes_total{job_id,rank,replica,direction} counter: sent | received
//   pipetrain_worker_offload_bytes_total{job_id,rank,replica}    counter
//   pipetrain_worker_busy                                        gauge: 1 while running a job
// A job's series are removed `retention` after its run on this worker ends (common/job_series.h).
// The daemon adds pipetrain_build_info and the gRPC server series through registry().
//
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic). A job's StepDone and
// RunEnded calls come in order from its run thread.
#ifndef PIPETRAIN_WORKER_SERVICE_WORKER_METRICS_H_
#define PIPETRAIN_WORKER_SERVICE_WORKER_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "common/job_series.h"
#include "worker/runtime/executor.h"

namespace pipetrain::worker {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(JobSeriesOptions job_series = {});

  // For an Exposer to serve: removes expired jobs' series, then collects everything.
  std::shared_ptr<prometheus::Collectable> collectable() const { return series_.collectable(); }
  // For other series on the same endpoint (build info, gRPC server metrics).
  prometheus::Registry& registry() { return *registry_; }

  void StepDone(const std::string& job_id, int rank, int replica, const StepResult& result);
  // The run of `job_id` on this worker ended (finished, failed or aborted).
  void RunEnded(const std::string& job_id);
  void SetBusy(bool busy);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  JobSeries series_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Gauge>& step_duration_;
  prometheus::Family<prometheus::Histogram>& step_seconds_;
  prometheus::Family<prometheus::Gauge>& peak_activation_bytes_;
  prometheus::Family<prometheus::Gauge>& device_peak_bytes_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Counter>& transfer_bytes_;
  prometheus::Family<prometheus::Counter>& offload_bytes_;
  prometheus::Gauge* busy_;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_WORKER_METRICS_H_
