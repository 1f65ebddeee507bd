// NcclGroups: which ranks of a job form each NCCL communicator, and which rank creates each
// communicator's unique id, for a job of d data-parallel replicas of a p-rank pipeline (job rank
// r = q * p + w: replica q, pipeline rank w; docs/data_parallel.md). Plain arithmetic, so the
// coordinator (which asks for the ids and hands them out) and the workers (which join) agree
// without a GPU.
//
// Two kinds of group:
// * the pipeline group of replica q: its p ranks q * p .. q * p + p - 1, rank in the group w.
//   Activations and input gradients between stages travel there (worker/transport/
//   nccl_transport.h). Only with p > 1.
// * the stage group of pipeline rank w: the d ranks w, p + w, .., (d - 1) p + w that hold the
//   same stages in every replica, rank in the group q. The per-stage gradient sums across the
//   replicas travel there. Only with d > 1.
// Each group's id is created by its rank 0 (members.front()): job rank q * p for replica q's
// pipeline group, replica 0's rank w for stage group w.
//
// Thread-safety: value types and pure functions.
#ifndef PIPETRAIN_COMMON_NCCL_GROUPS_H_
#define PIPETRAIN_COMMON_NCCL_GROUPS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace pipetrain {

enum class NcclGroupKind { kPipeline, kStage };

struct NcclGroup {
  NcclGroupKind kind = NcclGroupKind::kPipeline;
  int index = 0;             // the replica q (pipeline group) or the pipeline rank w (stage group)
  std::vector<int> members;  // job ranks, by rank in the group
  int creator() const { return members.front(); }  // the job rank that creates the unique id
};

// A rank's place in one group.
struct NcclMembership {
  NcclGroup group;
  int rank_in_group = 0;
};

// The most job ranks (d x p) a job may have (model::ValidateJobSpec's limit).
inline constexpr int kMaxNcclJobRanks = 4096;

// Every group of the job: the d pipeline groups (q ascending; none when p = 1), then the p stage
// groups (w ascending; none when d = 1). InvalidArgument unless p >= 1, d >= 1 and d x p <=
// kMaxNcclJobRanks.
absl::StatusOr<std::vector<NcclGroup>> NcclGroupsOf(int pipeline_ranks, int replicas);

// `job_rank`'s pipeline group (NotFound when p = 1) and stage group (NotFound when d = 1).
// InvalidArgument as NcclGroupsOf, or for a job rank outside 0 .. d x p - 1.
absl::StatusOr<NcclMembership> PipelineGroupOf(int job_rank, int pipeline_ranks, int replicas);
absl::StatusOr<NcclMembership> StageGroupOf(int job_rank, int pipeline_ranks, int replicas);

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_NCCL_GROUPS_H_
