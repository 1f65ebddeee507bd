// WorkerRegistryServiceImpl: the thin gRPC adapter of pipetrain.v1.WorkerRegistry (the API
// workers call): RegisterWorker and Heartbeat go to the WorkerRegistry, ReportStep to the
// JobManager. absl::Status becomes grpc::Status here and nowhere else for this service.
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_COORDINATOR_WORKER_REGISTRY_SERVICE_H_
#define PIPETRAIN_COORDINATOR_WORKER_REGISTRY_SERVICE_H_

#include "coordinator/job_manager.h"
#include "coordinator/metrics.h"
#include "coordinator/worker_registry.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"

namespace pipetrain::coordinator {

class WorkerRegistryServiceImpl final : public v1::WorkerRegistry::Service {
 public:
  // `metrics` may be null.
  WorkerRegistryServiceImpl(WorkerRegistry* registry, JobManager* jobs, CoordinatorMetrics* metrics)
      : registry_(registry), jobs_(jobs), metrics_(metrics) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status ReportStep(grpc::ServerContext* context, const v1::ReportStepRequest* request,
                          v1::ReportStepResponse* response) override;

 private:
  grpc::Status Finish(const char* method, const absl::Status& status) const;

  WorkerRegistry* const registry_;
  JobManager* const jobs_;
  CoordinatorMetrics* const metrics_;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_WORKER_REGISTRY_SERVICE_H_
