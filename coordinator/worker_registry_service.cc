#include "coordinator/worker_registry_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace pipetrain::coordinator {

grpc::Status WorkerRegistryServiceImpl::Finish(const char* method,
                                               const absl::Status& status) const {
  if (!status.ok() && metrics_ != nullptr) metrics_->RpcError(method);
  return ToGrpc(status);
}

grpc::Status WorkerRegistryServiceImpl::RegisterWorker(grpc::ServerContext*,
                                                       const v1::RegisterWorkerRequest* request,
                                                       v1::RegisterWorkerResponse* response) {
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
  r.cpu_cores = request->cpu_cores();
  r.compute_threads = request->compute_threads();
  r.device_index = request->device_index();
  r.device_name = request->device_name();
  r.compute_capability = request->compute_capability();
  r.core_sgemm_flops_per_s = request->core_sgemm_flops_per_s();
  absl::StatusOr<std::string> id = registry_->Register(r);
  if (!id.ok()) return Finish("RegisterWorker", id.status());
  response->set_worker_id(*id);
  response->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(registry_->heartbeat_interval()));
  return grpc::Status::OK;
}

grpc::Status WorkerRegistryServiceImpl::Heartbeat(grpc::ServerContext*,
                                                  const v1::HeartbeatRequest* request,
                                                  v1::HeartbeatResponse* response) {
  if (request->worker_id().empty()) {
    return Finish("Heartbeat", absl::InvalidArgumentError("worker_id: required"));
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

grpc::Status WorkerRegistryServiceImpl::ReportStep(grpc::ServerContext*,
                                                   const v1::ReportStepRequest* request,
                                                   v1::ReportStepResponse* response) {
  absl::StatusOr<v1::ReportStepResponse> result = jobs_->ReportStep(*request);
  if (!result.ok()) return Finish("ReportStep", result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

}  // namespace pipetrain::coordinator
