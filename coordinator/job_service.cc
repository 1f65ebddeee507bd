#include "coordinator/job_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_auth.h"
#include "common/grpc_status.h"

namespace pipetrain::coordinator {
namespace {

absl::Status RequireSpec(bool has_spec) {
  return has_spec ? absl::OkStatus() : absl::InvalidArgumentError("spec: required");
}

}  // namespace

absl::Status JobServiceImpl::Authorize(const grpc::ServerContext& context) const {
  if (auth_token_.empty()) return absl::OkStatus();
  const std::optional<absl::string_view> token = CallBearerToken(context);
  if (!token.has_value()) {
    return absl::UnauthenticatedError("authorization: missing \"Bearer <token>\" metadata");
  }
  // Compared in constant time, so the token cannot be guessed byte by byte from timings.
  if (!SameSecret(*token, auth_token_)) {
    return absl::UnauthenticatedError("authorization: wrong bearer token");
  }
  return absl::OkStatus();
}

grpc::Status JobServiceImpl::Finish(const char* method, const absl::Status& status) const {
  if (!status.ok() && metrics_ != nullptr) metrics_->RpcError(method);
  return ToGrpc(status);
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("SubmitJob", s);
  if (absl::Status s = RequireSpec(request->has_spec()); !s.ok()) return Finish("SubmitJob", s);
  absl::StatusOr<v1::Job> job = jobs_->Submit(request->spec());
  if (!job.ok()) return Finish("SubmitJob", job.status());
  *response->mutable_job() = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                    v1::Job* response) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("GetJob", s);
  absl::StatusOr<v1::Job> job = jobs_->Get(request->job_id());
  if (!job.ok()) return Finish("GetJob", job.status());
  *response = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("ListJobs", s);
  absl::StatusOr<JobPage> page =
      jobs_->List(request->state(), request->page_size(), request->page_token());
  if (!page.ok()) return Finish("ListJobs", page.status());
  for (v1::Job& job : page->jobs) *response->add_jobs() = std::move(job);
  response->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const v1::CancelJobRequest* request, v1::Job* response) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("CancelJob", s);
  absl::StatusOr<v1::Job> job = jobs_->Cancel(request->job_id());
  if (!job.ok()) return Finish("CancelJob", job.status());
  *response = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("WatchJob", s);
  absl::StatusOr<std::shared_ptr<JobWatch>> watch = jobs_->Watch(request->job_id());
  if (!watch.ok()) return Finish("WatchJob", watch.status());
  v1::JobEvent event;
  for (;;) {
    if (context->IsCancelled()) {
      (*watch)->Close();
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    if (stopping_) {
      (*watch)->Close();
      return Finish("WatchJob", absl::UnavailableError("the coordinator is shutting down"));
    }
    switch ((*watch)->Next(absl::Milliseconds(200), &event)) {
      case JobWatch::Result::kEvent:
        if (!writer->Write(event)) {
          (*watch)->Close();
          return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        }
        break;
      case JobWatch::Result::kEnded:
        return grpc::Status::OK;
      case JobWatch::Result::kTimeout:
        break;
    }
  }
}

grpc::Status JobServiceImpl::PlanJob(grpc::ServerContext* context,
                                     const v1::PlanJobRequest* request,
                                     v1::PlanJobResponse* response) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("PlanJob", s);
  if (absl::Status s = RequireSpec(request->has_spec()); !s.ok()) return Finish("PlanJob", s);
  absl::StatusOr<v1::Plan> plan = jobs_->Plan(request->spec());
  if (!plan.ok()) return Finish("PlanJob", plan.status());
  *response->mutable_plan() = std::move(*plan);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetStepTrace(grpc::ServerContext* context,
                                          const v1::GetStepTraceRequest* request,
                                          v1::StepTrace* response) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("GetStepTrace", s);
  absl::StatusOr<v1::StepTrace> trace = jobs_->GetStepTrace(request->job_id(), request->step());
  if (!trace.ok()) return Finish("GetStepTrace", trace.status());
  *response = std::move(*trace);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListWorkers(grpc::ServerContext* context,
                                         const v1::ListWorkersRequest* /*request*/,
                                         v1::ListWorkersResponse* response) {
  if (absl::Status s = Authorize(*context); !s.ok()) return Finish("ListWorkers", s);
  const absl::Time now = absl::Now();
  for (const WorkerInfo& w : registry_->List()) {
    v1::WorkerSummary* out = response->add_workers();
    out->set_id(w.id);
    out->set_name(w.registration.name);
    out->set_address(w.registration.address);
    out->set_host(w.registration.host);
    out->set_device(w.registration.device);
    out->set_device_name(w.registration.device_name);
    out->set_device_memory_bytes(w.registration.device_memory_bytes);
    out->set_state(WorkerStateName(w.state));
    out->set_job_id(w.job_id);
    out->set_seconds_since_heartbeat(absl::ToDoubleSeconds(now - w.last_heartbeat));
  }
  return grpc::Status::OK;
}

}  // namespace pipetrain::coordinator
