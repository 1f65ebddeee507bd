#include "coordinator/checkpoint_ledger.h"

#include <algorithm>

#include "glog/logging.h"
#include "model/checkpoint_layout.h"
#include "model/job_model.h"

namespace pipetrain::coordinator {

bool CheckpointLedger::Add(int rank, int64_t step) {
  if (rank < 0 || rank >= num_ranks_ || step <= newest_complete_) return false;
  std::set<int>& ranks = reported_[step];
  ranks.insert(rank);
  if (static_cast<int>(ranks.size()) < num_ranks_) return false;
  newest_complete_ = step;
  // Older incomplete steps can no longer complete usefully: forget them.
  reported_.erase(reported_.begin(), reported_.upper_bound(step));
  return true;
}

absl::Status CommitCheckpoint(JobStore& store, const v1::Job& job, int64_t step, int num_stages) {
  const v1::CheckpointSpec& spec = job.spec().checkpoint();
  const std::string& dir = spec.dir();
  if (absl::Status s = model::WriteCheckpointManifest(dir, {step, num_stages}); !s.ok()) {
    LOG(WARNING) << "job " << job.id() << ": checkpoint step-" << step
                 << " is complete but its manifest was not written: " << s;
  }
  if (absl::Status s = store.PutCheckpoint({job.id(), step, model::CheckpointStepDir(dir, step),
                                            /*complete=*/true});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<int64_t>> pruned =
      model::PruneCheckpoints(dir, model::WithDefaults(job.spec()).checkpoint().keep_last());
  if (!pruned.ok()) {
    LOG(WARNING) << "job " << job.id() << ": pruning " << dir << ": " << pruned.status();
  }
  return absl::OkStatus();
}

int64_t ResumeStep(JobStore& store, const v1::Job& job) {
  int64_t step = job.checkpoint_step();
  if (absl::StatusOr<std::vector<CheckpointRecord>> records = store.ListCheckpoints(job.id());
      records.ok()) {
    for (const CheckpointRecord& r : *records) {
      if (r.complete) step = std::max(step, r.step);
    }
  } else {
    LOG(WARNING) << "job " << job.id() << ": checkpoint records: " << records.status();
  }
  const std::string& dir = job.spec().checkpoint().dir();
  if (!dir.empty()) {
    if (absl::StatusOr<model::CheckpointManifest> m = model::ReadCheckpointManifest(dir); m.ok()) {
      step = std::max(step, m->step);
    }
  }
  // Never past the end (a resume runs at least one step; a finished run has nothing to redo).
  return std::min<int64_t>(step, job.spec().training().steps());
}

}  // namespace pipetrain::coordinator
