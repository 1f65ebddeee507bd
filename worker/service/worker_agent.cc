#include "worker/service/worker_agent.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/secret.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "schedule/codec/plan_proto.h"
#include "worker/service/host_lock.h"
#include "worker/transport/nccl_link.h"

namespace pipetrain::worker {
namespace {

v1::StepReport ToReport(const StepResult& r, const std::string& job_id,
                        const std::string& worker_id, int rank) {
  v1::StepReport report;
  report.set_job_id(job_id);
  report.set_worker_id(worker_id);
  report.set_rank(rank);
  report.set_step(r.step);
  report.set_has_loss(r.loss.has_value());
  report.set_loss(r.loss.value_or(0.0));
  report.set_step_duration_ns(r.duration_ns);
  report.set_peak_activation_bytes(r.peak_activation_bytes);
  report.set_device_peak_bytes(r.device_peak_bytes);
  report.set_offloaded_bytes(r.offloaded_bytes);
  report.set_sent_bytes(r.sent_bytes);
  report.set_received_bytes(r.received_bytes);
  report.set_update_skipped(r.update_skipped);
  report.set_learning_rate(r.learning_rate);
  if (r.validation.has_value()) {
    report.set_evaluated(true);
    report.set_has_val_loss(r.validation->loss.has_value());
    report.set_val_loss(r.validation->loss.value_or(0.0));
    report.set_eval_duration_ns(r.validation->duration_ns);
  }
  report.set_has_grad_norm(r.grad_norm.has_value());
  report.set_grad_norm(r.grad_norm.value_or(0.0));
  report.set_grad_clipped(r.grad_clipped);
  for (const ActionTiming& t : r.timings) {
    v1::ActionTiming* pt = report.add_timings();
    v1::Action* a = pt->mutable_action();
    a->set_kind(schedule::ActionKindToProto(t.action.kind));
    a->set_stage(t.action.stage);
    a->set_microbatch(t.action.microbatch);
    pt->set_start_ns(t.start_ns);
    pt->set_end_ns(t.end_ns);
    pt->set_bytes(t.bytes);
    pt->set_cpu_ns(t.cpu_ns);
  }
  for (const ReduceTiming& t : r.reduce_timings) {
    v1::GradientSum* sum = report.add_gradient_sums();
    sum->set_stage(t.stage);
    sum->set_start_ns(t.start_ns);
    sum->set_end_ns(t.end_ns);
    sum->set_bytes(t.bytes);
  }
  return report;
}

}  // namespace

WorkerAgent::WorkerAgent(WorkerAgentOptions options, CoordinatorClient* coordinator,
                         std::unique_ptr<TcpListener> listener, WorkerMetrics* metrics)
    : options_(std::move(options)),
      coordinator_(coordinator),
      metrics_(metrics),
      listener_(std::move(listener)),
      heartbeat_interval_(options_.heartbeat_interval) {}

WorkerAgent::~WorkerAgent() { Shutdown(); }

void WorkerAgent::Start(std::string grpc_address) {
  {
    absl::MutexLock lock(&mu_);
    grpc_address_ = std::move(grpc_address);
  }
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
}

void WorkerAgent::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;  // Prepare refuses from now on; the heartbeat loop ends
  }
  // No ordinary heartbeat may follow the leaving one (it would make this worker idle again).
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  v1::HeartbeatRequest leaving;
  {
    absl::MutexLock lock(&mu_);
    leaving.set_worker_id(worker_id_);
    leaving.set_job_id(job_id_);
    leaving.set_step(step_);
  }
  leaving.set_leaving(true);
  leaving.set_name(options_.name);
  // Tell the coordinator first, so it recovers the job now rather than after the heartbeat
  // deadline. Best effort: it may be away.
  if (!leaving.worker_id().empty()) {
    if (auto r = coordinator_->Heartbeat(leaving); !r.ok()) {
      LOG(WARNING) << "could not tell the coordinator this worker is leaving: " << r.status();
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (session_ != nullptr) session_->Cancel(absl::CancelledError("the worker is shutting down"));
  }
  ReapRun();
}

std::string WorkerAgent::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

absl::Status WorkerAgent::AuthorizeCoordinator(std::optional<absl::string_view> token) const {
  absl::MutexLock lock(&mu_);
  if (coordinator_token_.empty()) return absl::OkStatus();  // none issued: nothing to check
  if (token.has_value() && SameSecret(*token, coordinator_token_)) return absl::OkStatus();
  return absl::UnauthenticatedError(
      "authorization: Worker calls need the coordinator token issued at this worker's "
      "registration");
}

bool WorkerAgent::busy() const {
  absl::MutexLock lock(&mu_);
  return !job_id_.empty();
}

void WorkerAgent::ReapRun() {
  std::thread finished;
  {
    absl::MutexLock lock(&mu_);
    finished = std::move(run_thread_);
  }
  if (finished.joinable()) finished.join();
}

absl::StatusOr<std::string> WorkerAgent::CreateNcclId(const std::string& job_id) {
  if (options_.device != v1::DEVICE_KIND_CUDA) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, ": an NCCL id is made by a CUDA worker; this one is ",
        v1::DeviceKind_Name(options_.device)));
  }
  return NewNcclId();
}

absl::StatusOr<v1::PrepareResponse> WorkerAgent::Prepare(const v1::PrepareRequest& request) {
  if (request.job_id().empty()) return absl::InvalidArgumentError("job_id: required");
  std::unique_ptr<TcpListener> listener;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the worker is shutting down");
    if (!job_id_.empty() && job_id_ != request.job_id()) {
      return absl::FailedPreconditionError(
          absl::StrCat("this worker is busy with job ", job_id_, "; abort it first"));
    }
    if (running_) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id_, " is already running on this worker"));
    }
    job_id_ = request.job_id();
    // The job rank the coordinator knows this worker by (replica q's rank s: q * p + s).
    rank_ = request.replica() * request.plan().workers_size() + request.rank();
    replica_ = request.replica();
    attempt_ = request.attempt();
    ++generation_;
    // The agent keeps its listening socket for its lifetime and each session accepts on a
    // duplicate: were it closed between jobs, any process's outgoing connection could take the
    // port as its ephemeral one and the next Prepare could not bind it (seen in a test run:
    // "Address already in use" on three recovery attempts in a row).
    if (listener_ == nullptr) {
      const std::string& address = options_.transport_address;
      int port = 0;
      absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port);
      auto bound = TcpListener::Bind(address.substr(0, address.rfind(':')), port);
      if (!bound.ok()) {
        job_id_.clear();
        return bound.status();
      }
      listener_ = std::move(*bound);
    }
    auto duplicate = listener_->Duplicate();
    if (!duplicate.ok()) {
      job_id_.clear();
      return duplicate.status();
    }
    listener = std::move(*duplicate);
  }
  const int job_rank = request.replica() * request.plan().workers_size() + request.rank();
  if (request.rank() < 0 || job_rank < 0 || job_rank >= request.peers_size() ||
      request.peers(job_rank).address() != options_.transport_address) {
    absl::MutexLock lock(&mu_);
    job_id_.clear();
    return absl::InvalidArgumentError(absl::StrCat(
        "peers[rank=", job_rank, "].address must be this worker's transport address ",
        options_.transport_address));
  }
  auto session = WorkerSession::Create(request, options_.session, std::move(listener));
  v1::PrepareResponse response;
  if (session.ok() && request.profile()) {
    const HostLock alone(options_.profile_lock_path);  // one profiling worker per machine
    absl::StatusOr<std::vector<StageProfile>> profile = (*session)->Profile();
    if (!profile.ok()) {
      session = absl::Status(profile.status().code(),
                             absl::StrCat("profiling step: ", profile.status().message()));
    } else {
      for (const StageProfile& p : *profile) {
        v1::StageTiming* t = response.add_profile();
        t->set_stage(p.stage);
        t->set_forward_s(p.forward_s);
        t->set_backward_input_s(p.backward_input_s);
        t->set_backward_weight_s(p.backward_weight_s);
      }
    }
  }
  absl::MutexLock lock(&mu_);
  if (!session.ok()) {
    job_id_.clear();
    return session.status();
  }
  response.set_parameter_bytes((*session)->parameter_bytes());
  if (request.rank() < request.plan().prediction().peak_activation_bytes_size()) {
    response.set_predicted_peak_activation_bytes(
        request.plan().prediction().peak_activation_bytes(request.rank()));
  }
  session_ = std::move(*session);
  step_ = request.start_step();
  return response;
}

absl::Status WorkerAgent::StartRun(const v1::StartRequest& request) {
  ReapRun();
  absl::MutexLock lock(&mu_);
  if (session_ == nullptr || request.job_id() != job_id_) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", request.job_id(), " was not prepared on this worker"));
  }
  if (running_) return absl::FailedPreconditionError("already running");
  if (request.num_steps() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_steps: ", request.num_steps(), " is not allowed; allowed: >= 1"));
  }
  running_ = true;
  if (metrics_ != nullptr) metrics_->SetBusy(true);
  run_thread_ = std::thread([this, job = job_id_, n = request.num_steps()] { RunLoop(job, n); });
  return absl::OkStatus();
}

void WorkerAgent::RunLoop(std::string job_id, int num_steps) {
  std::shared_ptr<WorkerSession> session;
  std::string worker_id;
  int rank, replica, attempt;
  {
    absl::MutexLock lock(&mu_);
    session = session_;
    worker_id = worker_id_;
    rank = rank_;
    replica = replica_;
    attempt = attempt_;
  }
  absl::Status status = session->Run(num_steps, [&](const StepResult& r) -> absl::Status {
    if (metrics_ != nullptr) metrics_->StepDone(job_id, rank, replica, r);
    {
      absl::MutexLock lock(&mu_);
      step_ = r.step + 1;
    }
    v1::ReportStepRequest req;
    req.set_job_id(job_id);
    req.set_rank(rank);
    req.set_attempt(attempt);
    *req.mutable_report() = ToReport(r, job_id, worker_id, rank);
    // A checkpoint written after this step (0 = none; see metrics.proto).
    if (session->last_checkpoint_step() == r.step + 1) {
      req.mutable_report()->set_checkpoint_step(static_cast<int32_t>(r.step + 1));
    }
    auto response = coordinator_->ReportStep(req);
    if (!response.ok()) {
      LOG(WARNING) << "step report for " << job_id << " step " << r.step
                   << " not delivered: " << response.status();
    } else if (response->cancel()) {
      return absl::CancelledError("the coordinator stopped the job");
    }
    return absl::OkStatus();
  });
  // Frees the worker. Closing the transport waits, bounded, for the goodbye to go out; it
  // happens outside the lock.
  auto release = [&] {
    std::shared_ptr<WorkerSession> done;
    {
      absl::MutexLock lock(&mu_);
      running_ = false;
      job_id_.clear();
      done = std::move(session_);
      if (metrics_ != nullptr) {
        metrics_->SetBusy(false);
        metrics_->RunEnded(job_id);
      }
    }
    done.reset();
    session.reset();
  };
  v1::ReportStepRequest end;
  end.set_job_id(job_id);
  end.set_rank(rank);
  end.set_attempt(attempt);
  if (status.ok()) {
    // Free first, then say so: the coordinator may hand this worker its next job the moment
    // every rank has reported, and a Prepare that still found this job here was refused as
    // "busy" (costing the next job a restart).
    release();
    end.set_finished(true);
  } else {
    // A failure is reported first, so recovery starts without waiting for a dead peer's link.
    end.set_failure(absl::StrCat("rank ", rank, ": ", status.ToString()));
    LOG(WARNING) << "job " << job_id << " rank " << rank << " failed: " << status;
  }
  if (auto r = coordinator_->ReportStep(end); !r.ok()) {
    LOG(WARNING) << "end-of-run report for " << job_id << " not delivered: " << r.status();
  }
  if (!status.ok()) release();
}

absl::Status WorkerAgent::Abort(const v1::AbortRequest& request) {
  return AbortRun(request.job_id(), request.reason(), std::nullopt);
}

absl::Status WorkerAgent::AbortRun(const std::string& job_id, const std::string& reason,
                                   std::optional<int64_t> generation) {
  {
    absl::MutexLock lock(&mu_);
    if (job_id_.empty() || job_id != job_id_) return absl::OkStatus();  // idempotent
    if (generation.has_value() && *generation != generation_) return absl::OkStatus();
    if (session_ != nullptr) {
      session_->Cancel(absl::CancelledError(absl::StrCat("aborted: ", reason)));
    }
    if (!running_) {  // prepared but never started
      job_id_.clear();
      session_.reset();
    }
  }
  ReapRun();
  return absl::OkStatus();
}

void WorkerAgent::HeartbeatLoop() {
  absl::Duration backoff = absl::Milliseconds(100);
  std::string last_register_error;
  while (true) {
    absl::Duration wait;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      wait = heartbeat_interval_;
    }
    if (worker_id().empty()) {
      v1::RegisterWorkerRequest req;
      {
        absl::MutexLock lock(&mu_);
        req.set_address(grpc_address_);
      }
      req.set_transport_address(options_.transport_address);
      req.set_metrics_address(options_.metrics_address);
      req.set_device(options_.device);
      req.set_device_index(options_.device_info.index);
      req.set_device_name(options_.device_info.name);
      req.set_compute_capability(options_.device_info.compute_capability);
      req.set_core_sgemm_flops_per_s(options_.core_sgemm_flops_per_s);
      req.set_device_memory_bytes(options_.device_info.total_memory_bytes);
      req.set_d2h_bytes_per_s(options_.d2h_bytes_per_s);
      req.set_h2d_bytes_per_s(options_.h2d_bytes_per_s);
      req.set_name(options_.name);
      req.set_host(options_.host);
      req.set_zone(options_.zone);
      req.set_cpu_cores(options_.cpu_cores);
      req.set_compute_threads(options_.compute_threads);
      auto r = coordinator_->Register(req);
      if (r.ok()) {
        absl::MutexLock lock(&mu_);
        worker_id_ = r->worker_id();
        coordinator_token_ = r->coordinator_token();
        if (r->heartbeat_interval_ms() > 0) {
          heartbeat_interval_ = absl::Milliseconds(r->heartbeat_interval_ms());
        }
        wait = heartbeat_interval_;  // the first heartbeat at the coordinator's pace
        backoff = absl::Milliseconds(100);
        LOG(INFO) << "registered as " << worker_id_;
      } else {
        // Said once per distinct reason (a wrong cluster secret would otherwise go unseen).
        if (std::string reason = r.status().ToString(); reason != last_register_error) {
          LOG(WARNING) << "cannot register with the coordinator: " << reason;
          last_register_error = std::move(reason);
        }
        wait = backoff;  // the coordinator is away: retry with backoff
        backoff = std::min(backoff * 2, options_.max_backoff);
      }
    } else {
      v1::HeartbeatRequest req;
      int64_t generation;
      {
        absl::MutexLock lock(&mu_);
        req.set_worker_id(worker_id_);
        req.set_job_id(job_id_);
        req.set_step(step_);
        generation = generation_;
      }
      req.set_name(options_.name);  // an id from a previous coordinator may be another's now
      auto r = coordinator_->Heartbeat(req);
      if (r.ok() && r->reregister()) {
        absl::MutexLock lock(&mu_);
        worker_id_.clear();
      } else if (r.ok()) {
        for (const std::string& job : r->abort_job_ids()) {
          (void)AbortRun(job, "the coordinator asked in a heartbeat", generation);
        }
      }
    }
    absl::MutexLock lock(&mu_);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stop), wait);
  }
}

}  // namespace pipetrain::worker
