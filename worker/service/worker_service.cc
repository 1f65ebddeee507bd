#include "worker/service/worker_service.h"

#include "common/grpc_auth.h"
#include "common/grpc_status.h"

namespace pipetrain::worker {

grpc::Status WorkerServiceImpl::Prepare(grpc::ServerContext* context,
                                        const v1::PrepareRequest* request,
                                        v1::PrepareResponse* response) {
  if (absl::Status s = agent_->AuthorizeCoordinator(CallBearerToken(*context)); !s.ok()) {
    return ToGrpc(s);
  }
  auto result = agent_->Prepare(*request);
  if (!result.ok()) return ToGrpc(result.status());
  *response = *result;
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::CreateNcclId(grpc::ServerContext* context,
                                             const v1::CreateNcclIdRequest* request,
                                             v1::CreateNcclIdResponse* response) {
  if (absl::Status s = agent_->AuthorizeCoordinator(CallBearerToken(*context)); !s.ok()) {
    return ToGrpc(s);
  }
  absl::StatusOr<std::string> id = agent_->CreateNcclId(request->job_id());
  if (!id.ok()) return ToGrpc(id.status());
  response->set_nccl_unique_id(*std::move(id));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Start(grpc::ServerContext* context,
                                      const v1::StartRequest* request, v1::StartResponse*) {
  if (absl::Status s = agent_->AuthorizeCoordinator(CallBearerToken(*context)); !s.ok()) {
    return ToGrpc(s);
  }
  return ToGrpc(agent_->StartRun(*request));
}

grpc::Status WorkerServiceImpl::Abort(grpc::ServerContext* context,
                                      const v1::AbortRequest* request, v1::AbortResponse*) {
  if (absl::Status s = agent_->AuthorizeCoordinator(CallBearerToken(*context)); !s.ok()) {
    return ToGrpc(s);
  }
  return ToGrpc(agent_->Abort(*request));
}

grpc::Status WorkerServiceImpl::TransferTensor(grpc::ServerContext*,
                                               grpc::ServerReader<v1::TensorMessage>*,
                                               v1::TransferAck*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "this worker moves tensors over its TCP transport (transport_address in "
                      "its registration), not over gRPC");
}

}  // namespace pipetrain::worker
