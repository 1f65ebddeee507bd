// WorkerRegistryServiceImpl: the thin gRPC adapter of pipetrain.v1.WorkerRegistry (the API
// workers call): RegisterWorker and Heartbeat go to the WorkerRegistry, ReportStep to the
// JobManager. absl::Status becomes grpc::Status here and nowhere else for this service. With a
// cluster secret it also authenticates every call (docs/security.md).
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_COORDINATOR_WORKER_REGISTRY_SERVICE_H_
#define PIPETRAIN_COORDINATOR_WORKER_REGISTRY_SERVICE_H_

#include <string>
#include <utility>

#include "coordinator/job_manager.h"
#include "coordinator/metrics.h"
#include "coordinator/worker_registry.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"

namespace pipetrain::coordinator {

class WorkerRegistryServiceImpl final : public v1::WorkerRegistry::Service {
 public:
  // `metrics` may be null. `cluster_secret` non-empty: RegisterWorker needs it as a bearer
  // token, and Heartbeat and ReportStep need the session token the registration issued (the
  // registry must issue credentials).
  WorkerRegistryServiceImpl(WorkerRegistry* registry, JobManager* jobs, CoordinatorMetrics* metrics,
                            std::string cluster_secret = "")
      : registry_(registry),
        jobs_(jobs),
        metrics_(metrics),
        cluster_secret_(std::move(cluster_secret)) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status ReportStep(grpc::ServerContext* context, const v1::ReportStepRequest* request,
                          v1::ReportStepResponse* response) override;

 private:
  grpc::Status Finish(const char* method, const absl::Status& status) const;
  // With a cluster secret: the worker the call's session token belongs to, else Unauthenticated
  // (an empty id when no secret is set: nothing is checked).
  absl::StatusOr<std::string> Caller(const grpc::ServerContext& context) const;

  WorkerRegistry* const registry_;
  JobManager* const jobs_;
  CoordinatorMetrics* const metrics_;
  const std::string cluster_secret_;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_WORKER_REGISTRY_SERVICE_H_
