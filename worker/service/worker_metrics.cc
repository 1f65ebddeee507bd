#include "worker/service/worker_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/step_buckets.h"

namespace pipetrain::worker {

WorkerMetrics::WorkerMetrics(JobSeriesOptions job_series)
    : registry_(std::make_shared<prometheus::Registry>()),
      series_(registry_, job_series),
      steps_(prometheus::BuildCounter()
                 .Name("pipetrain_worker_steps_total")
                 .Help("Training steps this worker completed, per job and rank.")
                 .Register(*registry_)),
      step_duration_(prometheus::BuildGauge()
                         .Name("pipetrain_worker_step_duration_seconds")
                         .Help("Duration of this worker's last step.")
                         .Register(*registry_)),
      step_seconds_(prometheus::BuildHistogram()
                        .Name("pipetrain_worker_step_seconds")
                        .Help("Duration of every step this worker ran.")
                        .Register(*registry_)),
      peak_activation_bytes_(prometheus::BuildGauge()
                                 .Name("pipetrain_worker_peak_activation_bytes")
                                 .Help("Peak activation bytes held during this worker's last "
                                       "step.")
                                 .Register(*registry_)),
      device_peak_bytes_(prometheus::BuildGauge()
                             .Name("pipetrain_worker_device_peak_bytes")
                             .Help("All memory the device allocator held at its peak during "
                                   "this worker's last step.")
                             .Register(*registry_)),
      loss_(prometheus::BuildGauge()
                .Name("pipetrain_worker_loss")
                .Help("Loss of the last step (only on the worker holding the last stage).")
                .Register(*registry_)),
      transfer_bytes_(prometheus::BuildCounter()
                          .Name("pipetrain_worker_transfer_bytes_total")
                          .Help("Activation and gradient bytes moved to and from peers.")
                          .Register(*registry_)),
      offload_bytes_(prometheus::BuildCounter()
                         .Name("pipetrain_worker_offload_bytes_total")
                         .Help("Activation bytes offloaded to host memory.")
                         .Register(*registry_)),
      busy_(&prometheus::BuildGauge()
                 .Name("pipetrain_worker_busy")
                 .Help("1 while the worker runs a job.")
                 .Register(*registry_)
                 .Add({})) {}

void WorkerMetrics::StepDone(const std::string& job_id, int rank, int replica,
                             const StepResult& result) {
  const prometheus::Labels labels = {
      {"job_id", job_id}, {"rank", absl::StrCat(rank)}, {"replica", absl::StrCat(replica)}};
  series_.Get(steps_, job_id, labels).Increment();
  const double seconds = static_cast<double>(result.duration_ns) * 1e-9;
  series_.Get(step_duration_, job_id, labels).Set(seconds);
  series_.Get(step_seconds_, job_id, labels, StepSecondsBuckets()).Observe(seconds);
  series_.Get(peak_activation_bytes_, job_id, labels)
      .Set(static_cast<double>(result.peak_activation_bytes));
  series_.Get(device_peak_bytes_, job_id, labels)
      .Set(static_cast<double>(result.device_peak_bytes));
  if (result.loss) series_.Get(loss_, job_id, labels).Set(*result.loss);
  prometheus::Labels sent = labels, received = labels;
  sent.emplace("direction", "sent");
  received.emplace("direction", "received");
  series_.Get(transfer_bytes_, job_id, sent).Increment(static_cast<double>(result.sent_bytes));
  series_.Get(transfer_bytes_, job_id, received)
      .Increment(static_cast<double>(result.received_bytes));
  series_.Get(offload_bytes_, job_id, labels)
      .Increment(static_cast<double>(result.offloaded_bytes));
}

void WorkerMetrics::RunEnded(const std::string& job_id) { series_.Ended(job_id); }

void WorkerMetrics::SetBusy(bool busy) { busy_->Set(busy ? 1 : 0); }

}  // namespace pipetrain::worker
