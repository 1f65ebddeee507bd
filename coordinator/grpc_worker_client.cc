#include "coordinator/grpc_worker_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "common/grpc_status.h"

namespace pipetrain::coordinator {

std::unique_ptr<grpc::ClientContext> GrpcWorkerClient::ContextFor(const std::string& address,
                                                                  absl::Duration timeout) const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  if (credential_for_) {
    if (const std::string token = credential_for_(address); !token.empty()) {
      context->AddMetadata("authorization", "Bearer " + token);
    }
  }
  return context;
}

GrpcWorkerClient::LaunchCall::LaunchCall(GrpcWorkerClient* client, grpc::ClientContext* context)
    : client_(client), context_(context) {
  absl::MutexLock lock(&client_->mu_);
  cancelled_ = client_->launches_cancelled_;
  if (!cancelled_) client_->launch_calls_.insert(context_);
}

GrpcWorkerClient::LaunchCall::~LaunchCall() {
  absl::MutexLock lock(&client_->mu_);
  client_->launch_calls_.erase(context_);
}

void GrpcWorkerClient::CancelLaunchCalls() {
  absl::MutexLock lock(&mu_);
  launches_cancelled_ = true;
  for (grpc::ClientContext* context : launch_calls_) context->TryCancel();
}

v1::Worker::Stub* GrpcWorkerClient::StubFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<v1::Worker::Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (tls_.enabled) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = tls_.root_certs_pem;
      ssl.pem_cert_chain = tls_.cert_chain_pem;
      ssl.pem_private_key = tls_.private_key_pem;
      creds = grpc::SslCredentials(ssl);
    }
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);  // plans of large jobs
    stub = v1::Worker::NewStub(grpc::CreateCustomChannel(address, creds, args));
  }
  return stub.get();
}

absl::StatusOr<v1::PrepareResponse> GrpcWorkerClient::Prepare(const std::string& address,
                                                              const v1::PrepareRequest& request,
                                                              absl::Duration timeout) {
  const std::unique_ptr<grpc::ClientContext> context = ContextFor(address, timeout);
  const LaunchCall call(this, context.get());
  if (call.cancelled()) return absl::CancelledError("the coordinator is shutting down");
  v1::PrepareResponse response;
  const grpc::Status status = StubFor(address)->Prepare(context.get(), request, &response);
  if (!status.ok()) return FromGrpc(status);
  return response;
}

absl::StatusOr<std::string> GrpcWorkerClient::CreateNcclId(const std::string& address,
                                                           const std::string& job_id,
                                                           absl::Duration timeout) {
  const std::unique_ptr<grpc::ClientContext> context = ContextFor(address, timeout);
  const LaunchCall call(this, context.get());
  if (call.cancelled()) return absl::CancelledError("the coordinator is shutting down");
  v1::CreateNcclIdRequest request;
  request.set_job_id(job_id);
  v1::CreateNcclIdResponse response;
  const grpc::Status status = StubFor(address)->CreateNcclId(context.get(), request, &response);
  if (!status.ok()) return FromGrpc(status);
  return response.nccl_unique_id();
}

absl::Status GrpcWorkerClient::Start(const std::string& address, const v1::StartRequest& request,
                                     absl::Duration timeout) {
  const std::unique_ptr<grpc::ClientContext> context = ContextFor(address, timeout);
  const LaunchCall call(this, context.get());
  if (call.cancelled()) return absl::CancelledError("the coordinator is shutting down");
  v1::StartResponse response;
  return FromGrpc(StubFor(address)->Start(context.get(), request, &response));
}

absl::Status GrpcWorkerClient::Abort(const std::string& address, const v1::AbortRequest& request,
                                     absl::Duration timeout) {
  const std::unique_ptr<grpc::ClientContext> context = ContextFor(address, timeout);
  v1::AbortResponse response;
  return FromGrpc(StubFor(address)->Abort(context.get(), request, &response));
}

}  // namespace pipetrain::coordinator
