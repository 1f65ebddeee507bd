#include "tests/fakes/fake_worker_client.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "model/checkpoint_layout.h"

namespace pipetrain::testing {

FakeWorkerClient::~FakeWorkerClient() { Shutdown(); }

void FakeWorkerClient::SetBehavior(const std::string& address, const Behavior& behavior) {
  absl::MutexLock lock(&mu_);
  behaviors_[address] = behavior;
}

void FakeWorkerClient::SetPrepareBarrier(bool on) {
  absl::MutexLock lock(&mu_);
  barrier_ = on;
}

void FakeWorkerClient::SetAutoRun(ReportFn report, absl::Duration step_delay) {
  absl::MutexLock lock(&mu_);
  report_ = std::move(report);
  step_delay_ = step_delay;
}

void FakeWorkerClient::CancelLaunchCalls() {
  absl::MutexLock lock(&mu_);
  launches_cancelled_ = true;
}

void FakeWorkerClient::Shutdown() {
  std::vector<std::thread> runners;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    runners.swap(runners_);
  }
  for (std::thread& t : runners) t.join();
}

absl::StatusOr<std::string> FakeWorkerClient::CreateNcclId(const std::string& address,
                                                           const std::string& job_id,
                                                           absl::Duration) {
  absl::MutexLock lock(&mu_);
  nccl_id_calls_.push_back(address);
  const absl::Status status = behaviors_[address].nccl_id_status;
  if (!status.ok()) return status;
  return absl::StrCat("nccl-id-", nccl_id_calls_.size(), "-", job_id);
}

std::vector<std::string> FakeWorkerClient::nccl_id_calls() const {
  absl::MutexLock lock(&mu_);
  return nccl_id_calls_;
}

absl::StatusOr<v1::PrepareResponse> FakeWorkerClient::Prepare(const std::string& address,
                                                              const v1::PrepareRequest& request,
                                                              absl::Duration timeout) {
  Behavior b;
  {
    absl::MutexLock lock(&mu_);
    b = behaviors_[address];
    prepared_.push_back(request);
    by_address_[address] = request;
  }
  {
    absl::MutexLock lock(&mu_);
    if (b.prepare_delay > absl::ZeroDuration()) {
      mu_.AwaitWithTimeout(absl::Condition(&launches_cancelled_), std::min(b.prepare_delay, timeout));
    }
    if (launches_cancelled_) return absl::CancelledError("fake: launch calls cancelled");
    if (b.prepare_delay > timeout) return absl::DeadlineExceededError("fake: Prepare timed out");
    if (barrier_) {
      const std::string& job = request.job_id();
      ++in_prepare_[job];
      auto all_here = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return in_prepare_[job] >= request.peers_size() || launches_cancelled_;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&all_here), timeout)) {
        return absl::DeadlineExceededError("fake: pipeline neighbours never connected");
      }
      if (launches_cancelled_) return absl::CancelledError("fake: launch calls cancelled");
    }
  }
  if (!b.prepare_status.ok()) return b.prepare_status;
  v1::PrepareResponse response;
  response.set_parameter_bytes(1000);
  ProfileFn profile;
  {
    absl::MutexLock lock(&mu_);
    profile = profile_;
  }
  if (request.profile() && profile) {
    for (int s = 0; s < request.plan().stage_to_worker_size(); ++s) {
      if (request.plan().stage_to_worker(s) != request.rank()) continue;
      const std::array<double, 3> t = profile(s);
      v1::StageTiming* timing = response.add_profile();
      timing->set_stage(s);
      timing->set_forward_s(t[0]);
      timing->set_backward_input_s(t[1]);
      timing->set_backward_weight_s(t[2]);
    }
  }
  return response;
}

void FakeWorkerClient::SetProfile(ProfileFn stage_seconds) {
  absl::MutexLock lock(&mu_);
  profile_ = std::move(stage_seconds);
}

absl::Status FakeWorkerClient::Start(const std::string& address, const v1::StartRequest& request,
                                     absl::Duration) {
  Behavior b;
  v1::PrepareRequest prepared;
  {
    absl::MutexLock lock(&mu_);
    ++start_calls_;
    b = behaviors_[address];
    prepared = by_address_[address];
  }
  if (b.start_delay > absl::ZeroDuration()) absl::SleepFor(b.start_delay);
  if (!b.start_status.ok()) return b.start_status;
  absl::MutexLock lock(&mu_);
  if (prepared.job_id() != request.job_id()) {
    return absl::FailedPreconditionError("fake: Start for a job that was not prepared here");
  }
  if (report_ && !shutdown_) {
    if (b.fail_once && runs_[address] > 0) {
      b.fail_at_step = -1;
      b.crash_in_checkpoint = -1;
    }
    ++runs_[address];
    // Only an Abort after this Start stops the run (a job may be aborted while prepared and then
    // prepared again, e.g. after the profiling step).
    const int aborts_before = aborts_by_address_[address];
    runners_.emplace_back([this, address, prepared, n = request.num_steps(), b, aborts_before] {
      Run(address, prepared, n, b, aborts_before);
    });
  }
  return absl::OkStatus();
}

absl::Status FakeWorkerClient::Abort(const std::string& address, const v1::AbortRequest& request,
                                     absl::Duration) {
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    ++aborts_[request.job_id()];
    ++aborts_by_address_[address];
    delay = behaviors_[address].abort_delay;
  }
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
  absl::MutexLock lock(&mu_);
  return behaviors_[address].abort_status;
}

void FakeWorkerClient::Run(const std::string& address, v1::PrepareRequest prepared, int num_steps,
                           Behavior b, int aborts_before) {
  const int rank = prepared.rank();
  const v1::Plan& plan = prepared.plan();
  const int last_stage_rank = plan.stage_to_worker_size() > 0
                                  ? plan.stage_to_worker(plan.stage_to_worker_size() - 1)
                                  : prepared.peers_size() - 1;
  const v1::CheckpointSpec& ckpt = prepared.spec().checkpoint();
  ReportFn report;
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    report = report_;
    delay = step_delay_;
  }
  auto stop = [&] {
    absl::MutexLock lock(&mu_);
    return shutdown_ || aborts_by_address_[address] != aborts_before;
  };
  // This rank's stage files of checkpoint `n` (temp names when `torn`).
  auto write_checkpoint = [&](int n, bool torn) {
    std::filesystem::create_directories(model::CheckpointStepDir(ckpt.dir(), n));
    for (int s = 0; s < plan.stage_to_worker_size(); ++s) {
      if (plan.stage_to_worker(s) != rank) continue;
      const std::string path = model::StageCheckpointPath(ckpt.dir(), n, s);
      std::ofstream(torn ? path + ".tmp-fake" : path) << "fake";
    }
  };
  const int first = prepared.start_step();
  for (int step = first; step < first + num_steps; ++step) {
    if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
    if (stop() || step == b.stall_at_step) return;
    v1::ReportStepRequest request;
    request.set_job_id(prepared.job_id());
    request.set_rank(rank);
    request.set_attempt(prepared.attempt());
    const bool checkpoint =
        !ckpt.dir().empty() && ckpt.interval_steps() > 0 && (step + 1) % ckpt.interval_steps() == 0;
    if (step == b.fail_at_step || (checkpoint && step + 1 == b.crash_in_checkpoint)) {
      if (step + 1 == b.crash_in_checkpoint) write_checkpoint(step + 1, /*torn=*/true);
      request.set_failure(absl::StrCat("injected failure at step ", step, " on ", address));
      report(request).IgnoreError();
      return;
    }
    v1::StepReport* r = request.mutable_report();
    r->set_job_id(prepared.job_id());
    r->set_rank(rank);
    r->set_step(step);
    r->set_step_duration_ns(1000000 * (rank + 1));
    r->set_peak_activation_bytes(1000 * (rank + 1) + step);
    r->set_device_peak_bytes(100000 * (rank + 1) + step);
    r->set_update_skipped(b.skipped_updates.count(step) > 0);
    if (rank == 0) {
      r->set_has_grad_norm(true);
      r->set_grad_norm(1.0 + step / 4.0);
      r->set_grad_clipped(b.clipped_steps.count(step) > 0);
    }
    if (rank == last_stage_rank) {
      r->set_has_loss(true);
      r->set_loss(2.0 / (step + 1));
    }
    v1::ActionTiming* t = r->add_timings();
    t->mutable_action()->set_kind(v1::ACTION_KIND_F);
    t->set_start_ns(0);
    t->set_end_ns(500000);
    if (checkpoint) {
      write_checkpoint(step + 1, /*torn=*/false);
      r->set_checkpoint_step(step + 1);
    }
    if (step == first + num_steps - 1) request.set_finished(true);
    absl::StatusOr<v1::ReportStepResponse> response = report(request);
    if (response.ok() && response->cancel()) return;
  }
}

std::vector<v1::PrepareRequest> FakeWorkerClient::prepared() const {
  absl::MutexLock lock(&mu_);
  return prepared_;
}

int FakeWorkerClient::start_calls() const {
  absl::MutexLock lock(&mu_);
  return start_calls_;
}

int FakeWorkerClient::abort_calls(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = aborts_.find(job_id);
  return it == aborts_.end() ? 0 : it->second;
}

bool FakeWorkerClient::aborted(const std::string& job_id) const { return abort_calls(job_id) > 0; }

}  // namespace pipetrain::testing
