#include "worker/service/worker_metrics.h"

namespace pipetrain::worker {

WorkerMetrics::WorkerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  steps_ = &prometheus::BuildCounter()
                .Name("pipetrain_worker_steps_total")
                .Help("Training steps this worker completed")
                .Register(r)
                .Add({});
  step_seconds_ = &prometheus::BuildGauge()
                       .Name("pipetrain_worker_step_duration_seconds")
                       .Help("Duration of this worker's last step")
                       .Register(r)
                       .Add({});
  peak_activation_bytes_ = &prometheus::BuildGauge()
                                .Name("pipetrain_worker_peak_activation_bytes")
                                .Help("Peak activation bytes held during the last step")
                                .Register(r)
                                .Add({});
  loss_ = &prometheus::BuildGauge()
               .Name("pipetrain_worker_loss")
               .Help("Loss of the last step (only on the worker holding the last stage)")
               .Register(r)
               .Add({});
  auto& transfer = prometheus::BuildCounter()
                       .Name("pipetrain_worker_transfer_bytes_total")
                       .Help("Activation and gradient bytes moved to and from peers")
                       .Register(r);
  sent_bytes_ = &transfer.Add({{"direction", "sent"}});
  received_bytes_ = &transfer.Add({{"direction", "received"}});
  offloaded_bytes_ = &prometheus::BuildCounter()
                          .Name("pipetrain_worker_offload_bytes_total")
                          .Help("Activation bytes offloaded to host memory")
                          .Register(r)
                          .Add({});
  busy_ = &prometheus::BuildGauge()
               .Name("pipetrain_worker_busy")
               .Help("1 while the worker runs a job")
               .Register(r)
               .Add({});
}

void WorkerMetrics::StepDone(const StepResult& result) {
  steps_->Increment();
  step_seconds_->Set(result.duration_ns * 1e-9);
  peak_activation_bytes_->Set(static_cast<double>(result.peak_activation_bytes));
  if (result.loss) loss_->Set(*result.loss);
  sent_bytes_->Increment(static_cast<double>(result.sent_bytes));
  received_bytes_->Increment(static_cast<double>(result.received_bytes));
  offloaded_bytes_->Increment(static_cast<double>(result.offloaded_bytes));
}

void WorkerMetrics::SetBusy(bool busy) { busy_->Set(busy ? 1 : 0); }

}  // namespace pipetrain::worker
