// GrpcWorkerClient: WorkerClient over the pipetrain.v1.Worker gRPC service, one cached channel
// per worker address. Insecure by default; with TLS options it uses TLS (and presents a client
// certificate for mutual TLS when one is given). Calls carry the worker's coordinator token
// when the credential source has one (docs/security.md).
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_COORDINATOR_GRPC_WORKER_CLIENT_H_
#define PIPETRAIN_COORDINATOR_GRPC_WORKER_CLIENT_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/worker_client.h"
#include "pipetrain/v1/worker.grpc.pb.h"

namespace pipetrain::coordinator {

struct WorkerClientTls {
  bool enabled = false;
  std::string root_certs_pem;  // to verify workers; empty: the system roots
  std::string cert_chain_pem;  // client certificate for mutual TLS; may be empty
  std::string private_key_pem;
};

class GrpcWorkerClient : public WorkerClient {
 public:
  // The bearer token to present to the worker at an address ("" or unset: none).
  using CredentialFor = std::function<std::string(const std::string& address)>;

  explicit GrpcWorkerClient(WorkerClientTls tls = {}, CredentialFor credential_for = nullptr)
      : tls_(std::move(tls)), credential_for_(std::move(credential_for)) {}

  absl::StatusOr<v1::PrepareResponse> Prepare(const std::string& address,
                                              const v1::PrepareRequest& request,
                                              absl::Duration timeout) override;
  absl::StatusOr<std::string> CreateNcclId(const std::string& address, const std::string& job_id,
                                           absl::Duration timeout) override;
  absl::Status Start(const std::string& address, const v1::StartRequest& request,
                     absl::Duration timeout) override;
  absl::Status Abort(const std::string& address, const v1::AbortRequest& request,
                     absl::Duration timeout) override;

  void CancelLaunchCalls() override;

 private:
  // A launch call (Prepare, CreateNcclId, Start) registered for CancelLaunchCalls while it runs.
  class LaunchCall {
   public:
    LaunchCall(GrpcWorkerClient* client, grpc::ClientContext* context);
    ~LaunchCall();
    bool cancelled() const { return cancelled_; }

   private:
    GrpcWorkerClient* client_;
    grpc::ClientContext* context_;
    bool cancelled_;
  };

  v1::Worker::Stub* StubFor(const std::string& address);
  // A context with `timeout` and, when there is one, the worker's credential.
  std::unique_ptr<grpc::ClientContext> ContextFor(const std::string& address,
                                                  absl::Duration timeout) const;

  const WorkerClientTls tls_;
  const CredentialFor credential_for_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::Worker::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  bool launches_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> launch_calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_GRPC_WORKER_CLIENT_H_
