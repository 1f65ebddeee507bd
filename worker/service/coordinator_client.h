// CoordinatorClient: how a worker daemon talks to the coordinator's WorkerRegistry
// (register, heartbeat, step reports). An interface so the worker's domain logic is tested with
// a fake; GrpcCoordinatorClient is the real one (plaintext, TLS or mutual TLS).
//
// Thread-safety: implementations are thread-safe.
#ifndef PIPETRAIN_WORKER_SERVICE_COORDINATOR_CLIENT_H_
#define PIPETRAIN_WORKER_SERVICE_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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

// TLS for the worker -> coordinator channel (PEM contents, not file names).
struct CoordinatorTls {
  bool enabled = false;        // false: plaintext
  std::string root_certs_pem;  // verifies the coordinator; empty: the system roots
  std::string cert_chain_pem;  // this worker's certificate for mutual TLS; may be empty
  std::string private_key_pem;
};

// gRPC client for `address` (host:port); plaintext unless `tls.enabled`; every call has
// `deadline`. `cluster_secret` (if set) goes with registrations; the session token a
// registration returns goes with every later call (docs/security.md).
std::unique_ptr<CoordinatorClient> MakeGrpcCoordinatorClient(
    const std::string& address, absl::Duration deadline, const CoordinatorTls& tls = {},
    const std::string& cluster_secret = "");

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_COORDINATOR_CLIENT_H_
