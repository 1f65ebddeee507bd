// The coordinator's side of a job's checkpoints. Each worker writes its stages' files of
// <checkpoint.dir>/step-N atomically and reports N (StepReport.checkpoint_step); the checkpoint
// is complete once every rank of the current run has reported it. CheckpointLedger counts the
// reports; CommitCheckpoint makes a complete one the job's resume point: the manifest naming it
// is written last (model/checkpoint_layout.h), then the store records it complete, then older
// ones beyond keep_last are pruned. A step that some rank never reported (a worker killed while
// writing it) is never committed, so a resume uses the previous one.
//
// Thread-safety: CheckpointLedger is not thread-safe (the job manager holds its lock); the
// functions are thread-safe if the store is.
#ifndef PIPETRAIN_COORDINATOR_CHECKPOINT_LEDGER_H_
#define PIPETRAIN_COORDINATOR_CHECKPOINT_LEDGER_H_

#include <cstdint>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "coordinator/job_store.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::coordinator {

class CheckpointLedger {
 public:
  explicit CheckpointLedger(int num_ranks) : num_ranks_(num_ranks) {}

  // Rank `rank` wrote its part of step-`step`. True when this report made the step complete
  // (every rank has now reported it; later duplicates return false).
  bool Add(int rank, int64_t step);

 private:
  const int num_ranks_;
  std::map<int64_t, std::set<int>> reported_;  // by step, while incomplete
  int64_t newest_complete_ = 0;
};

// Commits complete checkpoint `step` of `job` (spec.checkpoint.dir, `num_stages` stage files):
// manifest, then the store's record (complete), then pruning to keep_last. Only the store
// record is required: a manifest or prune failure (say the directory is not visible from the
// coordinator) is logged and the checkpoint still counts, since every rank wrote its files
// atomically and reported them. Returns the store's error, if any.
absl::Status CommitCheckpoint(JobStore& store, const v1::Job& job, int64_t step, int num_stages);

// Where a job resumes after a coordinator restart: the newest of its own checkpoint_step, the
// store's complete records and the directory's manifest (a crash between writing the manifest
// and the store leaves the manifest ahead). 0: from the start.
int64_t ResumeStep(JobStore& store, const v1::Job& job);

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_CHECKPOINT_LEDGER_H_
