// CoordinatorClient: how a worker daemon talks to the coordinator's WorkerRegistry
// (register, heartbeat, step reports). An interface so the worker's domain logic is tested with
// a fake; GrpcCoordinatorClient is the real one.
//
// Thread-safety: implementations are thread-safe.
#ifndef PIPETRAIN_WORKER_SERVICE_COORDINATOR_CLIENT_H_
#define PIPETRAIN_WORKER_SERVICE_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pipetrain/v1/coordinator.pb.h"

namespace pipetrain::worker {

class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual absl::StatusOr<v1::RegisterWorkerResponse> Register(
      const v1::RegisterWorkerRequest& request) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) = 0;
  virtual absl::StatusOr<v1::ReportStepResponse> ReportStep(
      const v1::ReportStepRequest& request) = 0;
};

// gRPC client for `address` (host:port), insecure channel; every call has `deadline`.
std::unique_ptr<CoordinatorClient> MakeGrpcCoordinatorClient(const std::string& address,
                                                             absl::Duration deadline);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_COORDINATOR_CLIENT_H_
