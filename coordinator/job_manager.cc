#include "coordinator/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "coordinator/job_manager_internal.h"
#include "coordinator/metrics.h"
#include "glog/logging.h"
#include "model/job_model.h"
#include "planner/job_spec_validation.h"

namespace pipetrain::coordinator {
namespace {

using internal::BadField;
using internal::ResumePoint;
using internal::SetNow;
using internal::SlimCopy;

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

// Limits the coordinator adds to planner::ValidateJobSpec: free-text fields stay small.
absl::Status CheckTextFields(const v1::JobSpec& spec) {
  if (spec.name().size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: ", spec.name().size(), " characters is too long; allowed: <= 256"));
  }
  if (spec.training().data().path().size() > 4096) {
    return absl::InvalidArgumentError("training.data.path: too long; allowed: <= 4096 characters");
  }
  if (spec.checkpoint().dir().size() > 4096) {
    return absl::InvalidArgumentError("checkpoint.dir: too long; allowed: <= 4096 characters");
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

void SetNow(v1::TimestampNs* t) { t->set_unix_ns(absl::ToUnixNanos(absl::Now())); }

v1::Job SlimCopy(v1::Job& job, bool with_losses) {
  v1::Plan* plan = job.has_plan() ? job.release_plan() : nullptr;
  google::protobuf::RepeatedField<double> losses, rates;
  if (!with_losses) {
    losses.Swap(job.mutable_losses());
    rates.Swap(job.mutable_learning_rates());
  }
  v1::Job copy = job;
  if (!with_losses) {
    losses.Swap(job.mutable_losses());
    rates.Swap(job.mutable_learning_rates());
  }
  if (plan != nullptr) {
    google::protobuf::RepeatedPtrField<v1::WorkerActions> actions;
    actions.Swap(plan->mutable_workers());
    *copy.mutable_plan() = *plan;
    // The validation plan's actions too: events carry the plan's shape, not its program.
    if (copy.plan().has_evaluation()) copy.mutable_plan()->mutable_evaluation()->clear_workers();
    actions.Swap(plan->mutable_workers());
    job.set_allocated_plan(plan);
  }
  return copy;
}

absl::Status BadField(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

std::string ResumePoint(int step) {
  return step > 0 ? absl::StrCat("checkpoint step-", step) : std::string("the start");
}

}  // namespace internal

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

JobManager::JobManager(JobStore* store, WorkerRegistry* registry, WorkerClient* workers,
                       CoordinatorMetrics* metrics, JobManagerOptions options)
    : store_(store),
      registry_(registry),
      metrics_(metrics),
      options_(std::move(options)),
      planner_(options_.planner),
      dispatcher_(workers, options_.dispatch) {
  if (!planner_) {
    planner_ = [registry](const v1::JobSpec& spec,
                          const std::optional<planner::MeasuredStageCosts>& measured) {
      // Offload planning's host link: the slowest measured copy bandwidth over the registered
      // workers, when every one of them reported it (workers measure at start-up).
      planner::PlannerOptions options;
      options.measured = measured;
      const std::vector<WorkerInfo> workers =
          registry != nullptr ? registry->List() : std::vector<WorkerInfo>{};
      bool all = !workers.empty();
      double d2h = 0, h2d = 0;
      for (const WorkerInfo& w : workers) {
        const WorkerRegistration& r = w.registration;
        all &= r.d2h_bytes_per_s > 0 && r.h2d_bytes_per_s > 0;
        d2h = d2h == 0 ? r.d2h_bytes_per_s : std::min(d2h, r.d2h_bytes_per_s);
        h2d = h2d == 0 ? r.h2d_bytes_per_s : std::min(h2d, r.h2d_bytes_per_s);
      }
      if (all) {
        options.host_d2h_bytes_per_s = d2h;
        options.host_h2d_bytes_per_s = h2d;
      }
      // A CUDA job plans its activation budget from the smallest registered GPU's memory.
      if (model::RequiredDeviceKind(spec) == v1::DEVICE_KIND_CUDA) {
        for (const WorkerInfo& w : workers) {
          const WorkerRegistration& r = w.registration;
          if (r.device != v1::DEVICE_KIND_CUDA || r.device_memory_bytes <= 0) continue;
          options.device_memory_bytes = options.device_memory_bytes == 0
                                            ? r.device_memory_bytes
                                            : std::min(options.device_memory_bytes,
                                                       r.device_memory_bytes);
        }
      }
      return planner::PlanJob(spec, options);
    };
  }
  registry_->SetListeners([this](const std::string& worker, const std::string& job,
                                 const std::string& reason) { OnWorkerLost(worker, job, reason); },
                          [this] { Kick(); });
}

JobManager::~JobManager() { Shutdown(); }

absl::Status JobManager::Start() {
  PT_ASSIGN_OR_RETURN(std::vector<v1::Job> stored, store_->ListJobs(v1::JOB_STATE_UNSPECIFIED));
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("JobManager::Start called twice");
    started_ = true;
    for (v1::Job& job : stored) {
      std::optional<int64_t> seq = SequenceFromJobId(job.id());
      if (!seq.has_value()) {
        LOG(ERROR) << "job store: skipping a job with a malformed id \"" << job.id() << "\"";
        continue;
      }
      Record& r = jobs_[*seq];
      r.job = std::move(job);
      const v1::JobState state = r.job.state();
      if (metrics_ != nullptr) {
        metrics_->JobStateChanged(r.job.id(), v1::JOB_STATE_UNSPECIFIED, state);
      }
      if (!IsTerminal(state)) ++unfinished_;
      switch (state) {
        case v1::JOB_STATE_QUEUED:
          queued_.push_back(*seq);
          break;
        case v1::JOB_STATE_PLANNING:
          // A graceful shutdown finishes planning first, so this coordinator died while
          // planning the job. Planning it again could crash every restart (a crash loop under a
          // memory limit): it is failed instead.
          TransitionLocked(r, v1::JOB_STATE_FAILED,
                           "the coordinator stopped while planning this job (crashed or was "
                           "killed); it is not planned again after a restart, in case planning "
                           "it was the cause: resubmit it");
          break;
        case v1::JOB_STATE_WAITING_FOR_WORKERS:
          if (r.job.plan().workers_size() == 0 || !DecodeStoredPlan(r).ok()) {
            TransitionLocked(r, v1::JOB_STATE_QUEUED, "");
            queued_.push_back(*seq);
          } else {
            waiting_.insert(*seq);
            if (metrics_ != nullptr) metrics_->JobPlanned(r.job.id(), r.job.plan().prediction());
          }
          break;
        case v1::JOB_STATE_SUCCEEDED:
        case v1::JOB_STATE_FAILED:
        case v1::JOB_STATE_CANCELLED:
          break;
        default: {  // RUNNING, RECOVERING: resume from the newest complete checkpoint.
          if (r.job.plan().workers_size() == 0) {
            TransitionLocked(r, v1::JOB_STATE_FAILED, "coordinator restarted; the job had no plan");
            break;
          }
          // Its checkpoints were written under this plan: it cannot be planned again.
          if (absl::Status decoded = DecodeStoredPlan(r); !decoded.ok()) {
            TransitionLocked(r, v1::JOB_STATE_FAILED,
                             absl::StrCat("coordinator restarted; the stored plan is unreadable: ",
                                          decoded.message()));
            break;
          }
          r.job.set_checkpoint_step(static_cast<int32_t>(ResumeStep(*store_, r.job)));
          if (metrics_ != nullptr) {
            metrics_->JobPlanned(r.job.id(), r.job.plan().prediction());
            metrics_->JobRecovering(r.job.id());
          }
          const std::string reason = "coordinator restarted";
          RewindLocked(r, reason, /*counted=*/false);
          TransitionLocked(
              r, v1::JOB_STATE_RECOVERING,
              absl::StrCat(reason, "; resuming from ", ResumePoint(r.job.checkpoint_step()),
                           " once workers register"));
          waiting_.insert(*seq);
          break;
        }
      }
    }
    LOG(INFO) << "job manager: loaded " << jobs_.size() << " jobs (" << queued_.size()
              << " queued, " << waiting_.size() << " waiting for workers or recovering)";
  }
  scheduler_ = std::thread([this] { SchedulerLoop(); });
  return absl::OkStatus();
}

void JobManager::Shutdown() {
  {
    absl::MutexLock lock(&kick_mu_);
    stop_scheduler_ = true;
  }
  if (scheduler_.joinable()) scheduler_.join();
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      for (auto& [seq, r] : jobs_) {
        if (r.job.state() == v1::JOB_STATE_RUNNING) {
          // Abort the workers (a step in flight ends; checkpoint files are written atomically,
          // so nothing half-done stays) and resume on the next start.
          const std::string reason = "coordinator shutting down";
          RewindLocked(r, reason, /*counted=*/false);
          std::vector<DispatchTarget> targets = std::move(r.targets);
          r.targets.clear();
          r.aggregator.reset();
          r.ledger.reset();
          if (metrics_ != nullptr) metrics_->JobRecovering(r.job.id());
          TransitionLocked(r, v1::JOB_STATE_RECOVERING,
                           absl::StrCat(reason, "; resumes from ",
                                        ResumePoint(r.job.checkpoint_step()), " when it restarts"));
          const std::string job_id = r.job.id();
          tasks_.Spawn([this, job_id, targets = std::move(targets), reason] {
            dispatcher_.AbortAll(job_id, targets, reason);
            registry_->Release(job_id);
          });
        }
        for (const std::shared_ptr<JobWatch>& w : r.watchers) w->End();
        r.watchers.clear();
      }
    }
  }
  // A launch in flight waits on its workers' Prepare (up to prepare_timeout): cancel it. Its job
  // was rewound above and resumes after a restart; the aborts still go out.
  dispatcher_.CancelLaunches();
  tasks_.JoinAll();
}

absl::StatusOr<v1::Job> JobManager::Submit(const v1::JobSpec& spec) {
  PT_RETURN_IF_ERROR(planner::ValidateJobSpec(spec));
  PT_RETURN_IF_ERROR(CheckTextFields(spec));
  v1::Job stored;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the coordinator is shutting down");
    if (unfinished_ >= options_.max_unfinished_jobs) {
      return absl::ResourceExhaustedError(
          absl::StrCat("spec: the coordinator already holds ", unfinished_,
                       " unfinished jobs (the limit); wait for some to finish or cancel some"));
    }
    v1::Job job;
    *job.mutable_spec() = model::WithDefaults(spec);  // what will run, every default explicit
    job.set_state(v1::JOB_STATE_QUEUED);
    SetNow(job.mutable_created());
    *job.mutable_updated() = job.created();
    absl::StatusOr<v1::Job> created = store_->CreateJob(job);
    if (!created.ok()) {
      LOG(ERROR) << "job store: CreateJob: " << created.status();
      return absl::UnavailableError(absl::StrCat("the job store failed; the job was not accepted: ",
                                                 created.status().message()));
    }
    const int64_t seq = SequenceFromJobId(created->id()).value_or(0);
    Record& r = jobs_[seq];
    r.job = *created;
    queued_.push_back(seq);
    ++unfinished_;
    if (metrics_ != nullptr) {
      metrics_->JobSubmitted();
      metrics_->JobStateChanged(created->id(), v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED);
    }
    stored = std::move(*created);
  }
  Kick();
  return stored;
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  PT_ASSIGN_OR_RETURN(Record * r, const_cast<JobManager*>(this)->LookupLocked(job_id));
  return r->job;
}

absl::StatusOr<JobPage> JobManager::List(v1::JobState state, int page_size,
                                         const std::string& page_token) {
  if (!v1::JobState_IsValid(state)) {
    return BadField("state", absl::StrCat(static_cast<int>(state), " is not a JobState"));
  }
  if (page_size < 0 || page_size > kMaxPageSize) {
    return BadField("page_size", absl::StrCat(page_size, " is not allowed; allowed: 0..",
                                              kMaxPageSize, " (0 means ", kDefaultPageSize, ")"));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  int64_t after = 0;
  if (!page_token.empty()) {
    std::optional<int64_t> seq = SequenceFromJobId(page_token);
    if (!seq.has_value()) {
      return BadField("page_token", "not a token from a previous ListJobs response");
    }
    after = *seq;
  }
  JobPage page;
  absl::MutexLock lock(&mu_);
  for (auto it = jobs_.upper_bound(after); it != jobs_.end(); ++it) {
    if (state != v1::JOB_STATE_UNSPECIFIED && it->second.job.state() != state) continue;
    if (static_cast<int>(page.jobs.size()) == page_size) {
      page.next_page_token = page.jobs.back().id();
      break;
    }
    page.jobs.push_back(SlimCopy(it->second.job, /*with_losses=*/true));
  }
  return page;
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  PT_ASSIGN_OR_RETURN(Record * r, LookupLocked(job_id));
  const v1::JobState state = r->job.state();
  if (state == v1::JOB_STATE_CANCELLED) return r->job;
  if (IsTerminal(state)) {
    return absl::FailedPreconditionError(absl::StrCat("job_id: ", job_id, " already ended (",
                                                      v1::JobState_Name(state),
                                                      "); only unfinished jobs can be cancelled"));
  }
  waiting_.erase(SequenceFromJobId(job_id).value_or(0));
  TransitionLocked(*r, v1::JOB_STATE_CANCELLED, "cancelled by CancelJob");
  return r->job;
}

absl::StatusOr<std::shared_ptr<JobWatch>> JobManager::Watch(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  PT_ASSIGN_OR_RETURN(Record * r, LookupLocked(job_id));
  auto watch = std::make_shared<JobWatch>();
  v1::JobEvent event;
  *event.mutable_job() = SlimCopy(r->job, /*with_losses=*/true);
  event.set_message(absl::StrCat("state ", v1::JobState_Name(r->job.state())));
  watch->Push(event);
  if (IsTerminal(r->job.state()) || stopping_) {
    watch->End();
  } else {
    r->watchers.push_back(watch);
  }
  return watch;
}

absl::StatusOr<v1::Plan> JobManager::Plan(const v1::JobSpec& spec) const {
  PT_RETURN_IF_ERROR(CheckTextFields(spec));
  absl::StatusOr<planner::PlannedJob> planned = planner_(spec, std::nullopt);
  if (!planned.ok()) {
    if (absl::IsResourceExhausted(planned.status())) {
      return absl::InvalidArgumentError(planned.status().message());
    }
    return planned.status();
  }
  return std::move(planned->plan);
}

absl::StatusOr<v1::ReportStepResponse> JobManager::ReportStep(
    const v1::ReportStepRequest& request, const std::string& reporter) {
  v1::ReportStepResponse response;
  absl::MutexLock lock(&mu_);
  PT_ASSIGN_OR_RETURN(Record * found, LookupLocked(request.job_id()));
  Record& r = *found;
  if (r.job.state() != v1::JOB_STATE_RUNNING || r.aggregator == nullptr ||
      request.attempt() != r.job.recoveries_size()) {
    response.set_cancel(true);  // ended, recovering, or a report of an earlier attempt
    return response;
  }
  const int p = static_cast<int>(r.targets.size());
  const int rank = request.rank();
  if (rank < 0 || rank >= p) {
    return BadField(
        "rank", absl::StrCat(rank, " is not allowed; job ", r.job.id(), " has ranks 0..", p - 1));
  }
  if (!reporter.empty() && r.targets[rank].worker_id != reporter) {
    return absl::PermissionDeniedError(absl::StrCat("rank: ", rank, " of job ", r.job.id(),
                                                    " is not held by worker ", reporter));
  }
  if (request.has_report()) {
    const v1::StepReport& report = request.report();
    if (report.rank() != rank) {
      return BadField("report.rank", absl::StrCat(report.rank(), " differs from rank ", rank));
    }
    if (!report.job_id().empty() && report.job_id() != request.job_id()) {
      return BadField("report.job_id",
                      absl::StrCat("\"", report.job_id(), "\" differs from job_id"));
    }
    if (report.step() < 0 || report.step() >= r.job.spec().training().steps()) {
      return BadField("report.step", absl::StrCat(report.step(), " is not allowed; allowed: 0..",
                                                  r.job.spec().training().steps() - 1));
    }
    if (report.step_duration_ns() < 0) {
      return BadField("report.step_duration_ns", "must be >= 0");
    }
    if (report.peak_activation_bytes() < 0) {
      return BadField("report.peak_activation_bytes", "must be >= 0");
    }
    if (report.checkpoint_step() < 0 ||
        report.checkpoint_step() > r.job.spec().training().steps()) {
      return BadField("report.checkpoint_step",
                      absl::StrCat(report.checkpoint_step(), " is not allowed; allowed: 0..",
                                   r.job.spec().training().steps()));
    }
    std::vector<CompletedStep> completed = r.aggregator->Add(report, &r.job);
    for (CompletedStep& step : completed) {
      if (metrics_ != nullptr) metrics_->JobStep(r.job, step.rank_bubble_ratios);
      v1::JobEvent event;
      *event.mutable_job() = SlimCopy(r.job, /*with_losses=*/false);
      *event.mutable_step() = std::move(step.summary);
      PublishLocked(r, event);
      r.traces.Add(std::move(step.trace));
    }
    if (report.checkpoint_step() > 0 && r.ledger != nullptr &&
        r.ledger->Add(rank, report.checkpoint_step())) {
      CommitCheckpointLocked(r, report.checkpoint_step());  // persists the job
    } else if (!completed.empty() &&
               absl::Now() - r.last_persist >= options_.step_persist_interval) {
      PersistLocked(r);
    }
  }
  if (!request.failure().empty()) {
    BeginRecoveryLocked(r,
                        absl::StrCat("rank ", rank, " (worker ", r.targets[rank].worker_id,
                                     ") failed: ", request.failure()),
                        /*counted=*/true);
    response.set_cancel(true);
    return response;
  }
  if (request.finished()) {
    r.finished[rank] = true;
    if (std::all_of(r.finished.begin(), r.finished.end(), [](bool f) { return f; })) {
      const int steps = r.job.spec().training().steps();
      if (r.job.steps_done() >= steps) {
        TransitionLocked(r, v1::JOB_STATE_SUCCEEDED, "");
      } else {
        TransitionLocked(r, v1::JOB_STATE_FAILED,
                         absl::StrCat("every rank finished, but only ", r.job.steps_done(), " of ",
                                      steps, " steps were reported by every rank"));
      }
    }
  }
  return response;
}

absl::StatusOr<v1::StepTrace> JobManager::GetStepTrace(const std::string& job_id, int step) {
  if (step < -1) {
    return BadField("step", absl::StrCat(step, " is not allowed; allowed: >= 0, or -1 for the "
                                               "newest kept step"));
  }
  absl::MutexLock lock(&mu_);
  PT_ASSIGN_OR_RETURN(Record * r, LookupLocked(job_id));
  if (!r->traces_loaded) {  // after a restart the traces are only in the store
    r->traces_loaded = true;
    if (r->traces.empty()) {
      absl::StatusOr<std::vector<v1::StepTrace>> stored = store_->LoadStepTraces(job_id);
      if (!stored.ok()) {
        r->traces_loaded = false;
        return absl::UnavailableError(
            absl::StrCat("the job store failed to load the traces: ", stored.status().message()));
      }
      for (v1::StepTrace& trace : *stored) r->traces.Add(std::move(trace));
      r->traces.TakeChanged();
    }
  }
  std::optional<v1::StepTrace> trace = r->traces.Get(step);
  const std::vector<int> kept = r->traces.steps();
  if (!trace.has_value()) {
    if (kept.empty()) {
      return absl::NotFoundError(absl::StrCat("step: job ", job_id, " (",
                                              v1::JobState_Name(r->job.state()),
                                              ") has no measured step yet"));
    }
    return absl::NotFoundError(absl::StrCat("step: ", step, " is not kept for job ", job_id,
                                            "; kept steps: ", absl::StrJoin(kept, ", ")));
  }
  trace->set_job_id(job_id);
  trace->clear_kept_steps();
  for (int s : kept) trace->add_kept_steps(s);
  return *std::move(trace);
}

JobManager::Record* JobManager::FindLocked(const std::string& job_id) {
  std::optional<int64_t> seq = SequenceFromJobId(job_id);
  if (!seq.has_value()) return nullptr;
  auto it = jobs_.find(*seq);
  return it == jobs_.end() ? nullptr : &it->second;
}

absl::StatusOr<JobManager::Record*> JobManager::LookupLocked(const std::string& job_id) {
  if (job_id.empty()) return BadField("job_id", "required");
  if (!SequenceFromJobId(job_id).has_value()) {
    return BadField("job_id",
                    absl::StrCat("\"", job_id.substr(0, 64), "\" is not a job id (job-NNNNNN)"));
  }
  Record* r = FindLocked(job_id);
  if (r == nullptr) return absl::NotFoundError(absl::StrCat("job_id: no job ", job_id));
  return r;
}

void JobManager::PersistLocked(Record& r) {
  r.last_persist = absl::Now();
  if (absl::Status s = store_->UpdateJob(r.job); !s.ok()) {
    LOG(ERROR) << "job store: could not save " << r.job.id() << ": " << s;
  }
  if (r.traces.TakeChanged()) {
    if (absl::Status s = store_->SaveStepTraces(r.job.id(), r.traces.traces()); !s.ok()) {
      LOG(ERROR) << "job store: could not save the step traces of " << r.job.id() << ": " << s;
    }
  }
}

void JobManager::TransitionLocked(Record& r, v1::JobState state, const std::string& reason) {
  const v1::JobState from = r.job.state();
  r.job.set_state(state);
  // Recovery reasons go to job.recoveries and the event; failure_reason is for the end.
  if (!reason.empty() && (state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED)) {
    r.job.set_failure_reason(reason);
  }
  SetNow(r.job.mutable_updated());
  PersistLocked(r);
  if (metrics_ != nullptr) metrics_->JobStateChanged(r.job.id(), from, state);
  const bool terminal = IsTerminal(state);
  if (terminal && !IsTerminal(from)) --unfinished_;

  v1::JobEvent event;
  *event.mutable_job() = SlimCopy(r.job, /*with_losses=*/terminal);
  event.set_message(reason.empty()
                        ? absl::StrCat("state ", v1::JobState_Name(state))
                        : absl::StrCat("state ", v1::JobState_Name(state), ": ", reason));
  PublishLocked(r, event);
  if (!terminal) return;
  for (const std::shared_ptr<JobWatch>& w : r.watchers) w->End();
  r.watchers.clear();
  r.aggregator.reset();
  r.ledger.reset();
  if (r.targets.empty()) return;
  std::vector<DispatchTarget> targets = std::move(r.targets);
  r.targets.clear();
  const std::string job_id = r.job.id();
  if (state == v1::JOB_STATE_SUCCEEDED) {
    registry_->Release(job_id);
    return;
  }
  tasks_.Spawn([this, job_id, targets = std::move(targets), reason] {
    dispatcher_.AbortAll(job_id, targets, reason);
    registry_->Release(job_id);
  });
}

void JobManager::PublishLocked(Record& r, const v1::JobEvent& event) {
  std::erase_if(r.watchers, [](const std::shared_ptr<JobWatch>& w) { return w->closed(); });
  for (const std::shared_ptr<JobWatch>& w : r.watchers) w->Push(event);
}

}  // namespace pipetrain::coordinator
