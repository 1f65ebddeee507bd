#include "client/job_client.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace pipetrain::client {
namespace {

// FromGrpc, with a hint when the coordinator cannot be reached at all.
absl::Status Check(const grpc::Status& s, const std::string& address) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(absl::StrCat("cannot reach the coordinator at ", address,
                                               " (is it running? --coordinator sets the "
                                               "address; a TLS coordinator needs --tls-ca): ",
                                               s.error_message()));
  }
  return FromGrpc(s);
}

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read \"", path, "\""));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Plaintext when `tls` is empty, else SSL credentials from its files.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(const ClientTls& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert / --tls-key: give both or neither");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "--tls-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key_file, "--tls-key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

JobClient::JobClient(const std::string& address, std::string token, const ClientTls& tls,
                     absl::Duration deadline)
    : address_(address), token_(std::move(token)), deadline_(deadline) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = Credentials(tls);
  if (!creds.ok()) {
    init_status_ = creds.status();
    return;
  }
  // A big job's record or step trace (every action's timing on every rank) passes gRPC's
  // default 4 MiB: receive what the coordinator may send.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  stub_ = v1::JobService::NewStub(grpc::CreateCustomChannel(address, *creds, args));
}

void JobClient::Prepare(grpc::ClientContext* context, bool with_deadline) const {
  if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
  if (with_deadline) context->set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
}

absl::StatusOr<v1::Job> JobClient::Submit(const v1::JobSpec& spec) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext context;
  Prepare(&context, true);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitJobResponse response;
  if (grpc::Status s = stub_->SubmitJob(&context, request, &response); !s.ok()) {
    return Check(s, address_);
  }
  return response.job();
}

absl::StatusOr<v1::Job> JobClient::Get(const std::string& job_id) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext context;
  Prepare(&context, true);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  if (grpc::Status s = stub_->GetJob(&context, request, &job); !s.ok()) return Check(s, address_);
  return job;
}

absl::StatusOr<std::vector<v1::Job>> JobClient::List(v1::JobState state) {
  if (!init_status_.ok()) return init_status_;
  std::vector<v1::Job> jobs;
  std::string token;
  do {
    grpc::ClientContext context;
    Prepare(&context, true);
    v1::ListJobsRequest request;
    request.set_state(state);
    request.set_page_token(token);
    v1::ListJobsResponse response;
    if (grpc::Status s = stub_->ListJobs(&context, request, &response); !s.ok()) {
      return Check(s, address_);
    }
    jobs.insert(jobs.end(), response.jobs().begin(), response.jobs().end());
    token = response.next_page_token();
  } while (!token.empty());
  return jobs;
}

absl::StatusOr<v1::Job> JobClient::Cancel(const std::string& job_id) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext context;
  Prepare(&context, true);
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  if (grpc::Status s = stub_->CancelJob(&context, request, &job); !s.ok())
    return Check(s, address_);
  return job;
}

absl::StatusOr<v1::ListWorkersResponse> JobClient::ListWorkers() {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext context;
  Prepare(&context, true);
  v1::ListWorkersResponse response;
  if (grpc::Status s = stub_->ListWorkers(&context, v1::ListWorkersRequest(), &response);
      !s.ok()) {
    return Check(s, address_);
  }
  return response;
}

absl::StatusOr<v1::Plan> JobClient::Plan(const v1::JobSpec& spec) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext context;
  Prepare(&context, true);
  v1::PlanJobRequest request;
  *request.mutable_spec() = spec;
  v1::PlanJobResponse response;
  if (grpc::Status s = stub_->PlanJob(&context, request, &response); !s.ok()) {
    return Check(s, address_);
  }
  return response.plan();
}

absl::StatusOr<v1::StepTrace> JobClient::GetStepTrace(const std::string& job_id, int step) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext context;
  Prepare(&context, true);
  v1::GetStepTraceRequest request;
  request.set_job_id(job_id);
  request.set_step(step);
  v1::StepTrace response;
  if (grpc::Status s = stub_->GetStepTrace(&context, request, &response); !s.ok()) {
    return Check(s, address_);
  }
  return response;
}

absl::Status JobClient::Watch(const std::string& job_id,
                              const std::function<bool(const v1::JobEvent&)>& on_event) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext context;
  Prepare(&context, false);  // a watch lasts as long as the job
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      context.TryCancel();
      reader->Finish();
      return absl::CancelledError("stopped watching");
    }
  }
  return Check(reader->Finish(), address_);
}

}  // namespace pipetrain::client
