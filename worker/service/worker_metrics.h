// WorkerMetrics: the worker daemon's Prometheus series (pipetrain_worker_*), updated after every
// step. The Exposer that serves them is created in main.
//
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic).
#ifndef PIPETRAIN_WORKER_SERVICE_WORKER_METRICS_H_
#define PIPETRAIN_WORKER_SERVICE_WORKER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>

#include "worker/runtime/executor.h"

namespace pipetrain::worker {

class WorkerMetrics {
 public:
  WorkerMetrics();
  std::shared_ptr<prometheus::Registry> registry() { return registry_; }

  void StepDone(const StepResult& result);
  void SetBusy(bool busy);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* steps_;
  prometheus::Gauge* step_seconds_;
  prometheus::Gauge* peak_activation_bytes_;
  prometheus::Gauge* loss_;
  prometheus::Counter* sent_bytes_;
  prometheus::Counter* received_bytes_;
  prometheus::Counter* offloaded_bytes_;
  prometheus::Gauge* busy_;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_WORKER_METRICS_H_
