// JobManager, recovery: a lost worker or a failed launch rewinds the job to its last checkpoint,
// stops the attempt on every worker and queues it again, within the restart budget.
#include "coordinator/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/job_manager_internal.h"
#include "coordinator/metrics.h"
#include "glog/logging.h"
#include "model/job_model.h"

namespace pipetrain::coordinator {
namespace {

using internal::ResumePoint;
using internal::SetNow;

// spec.max_restarts after its default; negative means none.
int MaxRestarts(const v1::JobSpec& spec) {
  return std::max(0, model::WithDefaults(spec).max_restarts());
}

}  // namespace

void JobManager::OnWorkerLost(const std::string& worker_id, const std::string& job_id,
                              const std::string& reason) {
  absl::MutexLock lock(&mu_);
  Record* r = FindLocked(job_id);
  if (r == nullptr || r->job.state() != v1::JOB_STATE_RUNNING) return;
  LOG(WARNING) << "job " << job_id << ": lost worker " << worker_id << ": " << reason;
  BeginRecoveryLocked(*r, absl::StrCat("lost a worker: ", reason), /*counted=*/true);
}

void JobManager::RewindLocked(Record& r, const std::string& reason, bool counted) {
  const int resume = r.job.checkpoint_step();
  v1::JobRecovery* recovery = r.job.add_recoveries();
  SetNow(recovery->mutable_time());
  recovery->set_reason(reason);
  recovery->set_resume_step(resume);
  recovery->set_counted(counted);
  // The resumed run redoes (bitwise identically) the steps after the checkpoint.
  r.job.set_steps_done(std::min(r.job.steps_done(), resume));
  if (r.job.losses_size() > resume) r.job.mutable_losses()->Truncate(resume);
  if (r.job.learning_rates_size() > resume) r.job.mutable_learning_rates()->Truncate(resume);
  // Validation passes after the checkpoint are redone too.
  auto* evals = r.job.mutable_evaluations();
  while (!evals->empty() && evals->rbegin()->step() > resume) evals->RemoveLast();
  // Skipped updates past the checkpoint are redone too (and skipped again).
  auto* skipped = r.job.mutable_skipped_steps();
  skipped->erase(std::remove_if(skipped->begin(), skipped->end(),
                                [resume](int32_t step) { return step >= resume; }),
                 skipped->end());
  if (r.job.grad_norms_size() > resume) r.job.mutable_grad_norms()->Truncate(resume);
  auto* clipped = r.job.mutable_clipped_steps();
  clipped->erase(std::remove_if(clipped->begin(), clipped->end(),
                                [resume](int32_t step) { return step >= resume; }),
                 clipped->end());
  r.finished.clear();
}

void JobManager::BeginRecoveryLocked(Record& r, const std::string& reason, bool counted) {
  const std::string job_id = r.job.id();
  if (r.job.steps_done() >= r.job.spec().training().steps()) {
    // Every rank reported every step: nothing is left to redo.
    TransitionLocked(r, v1::JOB_STATE_SUCCEEDED, "");
    return;
  }
  if (counted) {
    const int budget = MaxRestarts(r.job.spec());
    if (r.job.restarts() >= budget) {
      TransitionLocked(r, v1::JOB_STATE_FAILED,
                       budget == 0
                           ? reason
                           : absl::StrCat(reason, " (restart budget used up: ", r.job.restarts(),
                                          " of max_restarts ", budget, ")"));
      return;
    }
    r.job.set_restarts(r.job.restarts() + 1);
  }
  LOG(WARNING) << "job " << job_id << ": recovering from " << ResumePoint(r.job.checkpoint_step())
               << ": " << reason;
  RewindLocked(r, reason, counted);
  std::vector<DispatchTarget> targets = std::move(r.targets);
  r.targets.clear();
  r.aggregator.reset();
  r.ledger.reset();
  if (metrics_ != nullptr) metrics_->JobRecovering(job_id);
  TransitionLocked(r, v1::JOB_STATE_RECOVERING,
                   absl::StrCat(reason, "; resuming from ", ResumePoint(r.job.checkpoint_step())));
  const int64_t seq = SequenceFromJobId(job_id).value_or(0);
  tasks_.Spawn([this, seq, job_id, targets = std::move(targets), reason] {
    // Stop the attempt everywhere before it is dispatched again.
    const std::vector<absl::Status> aborted =
        dispatcher_.AbortAll(job_id, targets, absl::StrCat("recovering: ", reason));
    for (size_t i = 0; i < aborted.size(); ++i) {
      if (!aborted[i].ok()) registry_->MarkLost(targets[i].worker_id);
    }
    registry_->Release(job_id);
    {
      absl::MutexLock lock(&mu_);
      Record* r = FindLocked(job_id);
      if (r != nullptr && r->job.state() == v1::JOB_STATE_RECOVERING && !stopping_) {
        waiting_.insert(seq);
        LOG(INFO) << "job " << job_id << ": stopped on its workers; waiting for "
                  << r->job.plan().workers_size() << " idle workers";
      }
    }
    Kick();
  });
}

void JobManager::CommitCheckpointLocked(Record& r, int64_t step) {
  const int num_stages = r.job.plan().stage_to_worker_size();
  if (absl::Status s = CommitCheckpoint(*store_, r.job, step, num_stages); !s.ok()) {
    // Not recorded, so not a resume point; the previous one stays.
    LOG(ERROR) << "job " << r.job.id() << ": checkpoint step-" << step << " not recorded: " << s;
    return;
  }
  r.job.set_checkpoint_step(static_cast<int32_t>(step));
  if (metrics_ != nullptr) metrics_->JobCheckpointed(r.job.id(), step);
  PersistLocked(r);
}

}  // namespace pipetrain::coordinator
