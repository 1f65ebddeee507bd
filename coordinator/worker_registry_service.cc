#include "coordinator/worker_registry_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_auth.h"
#include "common/grpc_status.h"

namespace pipetrain::coordinator {

grpc::Status WorkerRegistryServiceImpl::Finish(const char* method,
                                               const absl::Status& status) const {
  if (!status.ok() && metrics_ != nullptr) metrics_->RpcError(method);
  return ToGrpc(status);
}

absl::StatusOr<std::string> WorkerRegistryServiceImpl::Caller(
    const grpc::ServerContext& context) const {
  if (cluster_secret_.empty()) return std::string();
  const std::optional<absl::string_view> token = CallBearerToken(context);
  std::optional<std::string> worker =
      token.has_value() ? registry_->WorkerWithSessionToken(*token) : std::nullopt;
  if (!worker.has_value()) {
    return absl::UnauthenticatedError(
        "authorization: this call needs the session token issued at registration");
  }
  return *std::move(worker);
}

grpc::Status WorkerRegistryServiceImpl::RegisterWorker(grpc::ServerContext* context,
                                                       const v1::RegisterWorkerRequest* request,
                                                       v1::RegisterWorkerResponse* response) {
  if (!cluster_secret_.empty()) {
    const std::optional<absl::string_view> token = CallBearerToken(*context);
    if (!token.has_value() || !SameSecret(*token, cluster_secret_)) {
      return Finish("RegisterWorker",
                    absl::UnauthenticatedError(
                        "authorization: registering needs the cluster secret (pipetrain-worker "
                        "--cluster-secret-file, or PIPETRAIN_CLUSTER_SECRET)"));
    }
  }
  WorkerRegistration r;
  r.name = request->name();
  r.address = request->address();
  r.transport_address = request->transport_address();
  r.metrics_address = request->metrics_address();
  r.device = request->device();
  r.device_memory_bytes = request->device_memory_bytes();
  r.host_memory_bytes = request->host_memory_bytes();
  r.d2h_bytes_per_s = request->d2h_bytes_per_s();
  r.h2d_bytes_per_s = request->h2d_bytes_per_s();
  r.host = request->host();
  r.zone = request->zone();
  r.cpu_cores = request->cpu_cores();
  r.compute_threads = request->compute_threads();
  r.device_index = request->device_index();
  r.device_name = request->device_name();
  r.compute_capability = request->compute_capability();
  r.core_sgemm_flops_per_s = request->core_sgemm_flops_per_s();
  absl::StatusOr<std::string> id = registry_->Register(r);
  if (!id.ok()) return Finish("RegisterWorker", id.status());
  response->set_worker_id(*id);
  if (std::optional<WorkerInfo> w = registry_->Get(*id); w.has_value()) {
    response->set_session_token(w->session_token);
    response->set_coordinator_token(w->coordinator_token);
  }
  response->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(registry_->heartbeat_interval()));
  return grpc::Status::OK;
}

grpc::Status WorkerRegistryServiceImpl::Heartbeat(grpc::ServerContext* context,
                                                  const v1::HeartbeatRequest* request,
                                                  v1::HeartbeatResponse* response) {
  if (request->worker_id().empty()) {
    return Finish("Heartbeat", absl::InvalidArgumentError("worker_id: required"));
  }
  // An id this coordinator does not know is told to register (that says nothing); a known one
  // must be its holder: a spoofed "leaving" heartbeat would send its job into recovery.
  if (registry_->Get(request->worker_id()).has_value()) {
    absl::StatusOr<std::string> caller = Caller(*context);
    if (!caller.ok()) return Finish("Heartbeat", caller.status());
    if (!caller->empty() && *caller != request->worker_id()) {
      return Finish("Heartbeat", absl::PermissionDeniedError(absl::StrCat(
                                     "worker_id: ", request->worker_id(),
                                     " is not the worker this session token was issued to")));
    }
  }
  if (request->step() < 0) {
    return Finish("Heartbeat", absl::InvalidArgumentError(
                                   absl::StrCat("step: ", request->step(), " is negative")));
  }
  HeartbeatResult result =
      registry_->Heartbeat(request->worker_id(), request->job_id(), request->leaving(),
                           request->name());
  response->set_reregister(result.reregister);
  for (std::string& id : result.abort_job_ids) response->add_abort_job_ids(std::move(id));
  return grpc::Status::OK;
}

grpc::Status WorkerRegistryServiceImpl::ReportStep(grpc::ServerContext* context,
                                                   const v1::ReportStepRequest* request,
                                                   v1::ReportStepResponse* response) {
  absl::StatusOr<std::string> caller = Caller(*context);
  if (!caller.ok()) return Finish("ReportStep", caller.status());
  absl::StatusOr<v1::ReportStepResponse> result = jobs_->ReportStep(*request, *caller);
  if (!result.ok()) return Finish("ReportStep", result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

}  // namespace pipetrain::coordinator
