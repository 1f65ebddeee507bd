#include "worker/service/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"

namespace pipetrain::worker {
namespace {

std::shared_ptr<grpc::ChannelCredentials> Credentials(const CoordinatorTls& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls.root_certs_pem;
  ssl.pem_cert_chain = tls.cert_chain_pem;
  ssl.pem_private_key = tls.private_key_pem;
  return grpc::SslCredentials(ssl);
}

class GrpcCoordinatorClient final : public CoordinatorClient {
 public:
  GrpcCoordinatorClient(const std::string& address, absl::Duration deadline,
                        const CoordinatorTls& tls, std::string cluster_secret)
      : stub_(v1::WorkerRegistry::NewStub(grpc::CreateChannel(address, Credentials(tls)))),
        deadline_(deadline),
        cluster_secret_(std::move(cluster_secret)) {}

  absl::StatusOr<v1::RegisterWorkerResponse> Register(
      const v1::RegisterWorkerRequest& request) override {
    absl::StatusOr<v1::RegisterWorkerResponse> response = Call(
        &v1::WorkerRegistry::Stub::RegisterWorker, request, v1::RegisterWorkerResponse(),
        cluster_secret_);
    if (response.ok()) {
      absl::MutexLock lock(&mu_);
      session_token_ = response->session_token();  // what every later call presents
    }
    return response;
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override {
    return Call(&v1::WorkerRegistry::Stub::Heartbeat, request, v1::HeartbeatResponse(),
                session_token());
  }
  absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& request) override {
    return Call(&v1::WorkerRegistry::Stub::ReportStep, request, v1::ReportStepResponse(),
                session_token());
  }

 private:
  template <typename Method, typename Request, typename Response>
  absl::StatusOr<Response> Call(Method method, const Request& request, Response response,
                                const std::string& bearer) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
    if (!bearer.empty()) context.AddMetadata("authorization", "Bearer " + bearer);
    grpc::Status status = ((*stub_).*method)(&context, request, &response);
    if (!status.ok()) return FromGrpc(status);
    return response;
  }
  std::string session_token() const {
    absl::MutexLock lock(&mu_);
    return session_token_;
  }

  std::unique_ptr<v1::WorkerRegistry::Stub> stub_;
  const absl::Duration deadline_;
  const std::string cluster_secret_;
  mutable absl::Mutex mu_;
  std::string session_token_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<CoordinatorClient> MakeGrpcCoordinatorClient(const std::string& address,
                                                             absl::Duration deadline,
                                                             const CoordinatorTls& tls,
                                                             const std::string& cluster_secret) {
  return std::make_unique<GrpcCoordinatorClient>(address, deadline, tls, cluster_secret);
}

}  // namespace pipetrain::worker
