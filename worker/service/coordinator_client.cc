#include "worker/service/coordinator_client.h"

#include <grpcpp/grpcpp.h>

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
                        const CoordinatorTls& tls)
      : stub_(v1::WorkerRegistry::NewStub(grpc::CreateChannel(address, Credentials(tls)))),
        deadline_(deadline) {}

  absl::StatusOr<v1::RegisterWorkerResponse> Register(
      const v1::RegisterWorkerRequest& request) override {
    return Call(&v1::WorkerRegistry::Stub::RegisterWorker, request, v1::RegisterWorkerResponse());
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override {
    return Call(&v1::WorkerRegistry::Stub::Heartbeat, request, v1::HeartbeatResponse());
  }
  absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& request) override {
    return Call(&v1::WorkerRegistry::Stub::ReportStep, request, v1::ReportStepResponse());
  }

 private:
  template <typename Method, typename Request, typename Response>
  absl::StatusOr<Response> Call(Method method, const Request& request, Response response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
    grpc::Status status = ((*stub_).*method)(&context, request, &response);
    if (!status.ok()) return FromGrpc(status);
    return response;
  }

  std::unique_ptr<v1::WorkerRegistry::Stub> stub_;
  const absl::Duration deadline_;
};

}  // namespace

std::unique_ptr<CoordinatorClient> MakeGrpcCoordinatorClient(const std::string& address,
                                                             absl::Duration deadline,
                                                             const CoordinatorTls& tls) {
  return std::make_unique<GrpcCoordinatorClient>(address, deadline, tls);
}

}  // namespace pipetrain::worker
