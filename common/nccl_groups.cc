#include "common/nccl_groups.h"

#include "absl/strings/str_cat.h"

namespace pipetrain {
namespace {

absl::Status CheckShape(int pipeline_ranks, int replicas) {
  if (pipeline_ranks < 1 || replicas < 1 ||
      static_cast<long long>(pipeline_ranks) * replicas > kMaxNcclJobRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL groups of ", replicas, " replicas x ", pipeline_ranks,
        " pipeline ranks: allowed are >= 1 of each and at most ", kMaxNcclJobRanks, " ranks"));
  }
  return absl::OkStatus();
}

absl::Status CheckRank(int job_rank, int pipeline_ranks, int replicas) {
  if (absl::Status s = CheckShape(pipeline_ranks, replicas); !s.ok()) return s;
  if (job_rank < 0 || job_rank >= pipeline_ranks * replicas) {
    return absl::InvalidArgumentError(absl::StrCat("job rank ", job_rank, " is outside 0..",
                                                   pipeline_ranks * replicas - 1));
  }
  return absl::OkStatus();
}

NcclGroup PipelineGroup(int replica, int pipeline_ranks) {
  NcclGroup g;
  g.kind = NcclGroupKind::kPipeline;
  g.index = replica;
  for (int w = 0; w < pipeline_ranks; ++w) g.members.push_back(replica * pipeline_ranks + w);
  return g;
}

NcclGroup StageGroup(int pipeline_rank, int pipeline_ranks, int replicas) {
  NcclGroup g;
  g.kind = NcclGroupKind::kStage;
  g.index = pipeline_rank;
  for (int q = 0; q < replicas; ++q) g.members.push_back(q * pipeline_ranks + pipeline_rank);
  return g;
}

}  // namespace

absl::StatusOr<std::vector<NcclGroup>> NcclGroupsOf(int pipeline_ranks, int replicas) {
  if (absl::Status s = CheckShape(pipeline_ranks, replicas); !s.ok()) return s;
  std::vector<NcclGroup> groups;
  if (pipeline_ranks > 1) {
    for (int q = 0; q < replicas; ++q) groups.push_back(PipelineGroup(q, pipeline_ranks));
  }
  if (replicas > 1) {
    for (int w = 0; w < pipeline_ranks; ++w) {
      groups.push_back(StageGroup(w, pipeline_ranks, replicas));
    }
  }
  return groups;
}

absl::StatusOr<NcclMembership> PipelineGroupOf(int job_rank, int pipeline_ranks, int replicas) {
  if (absl::Status s = CheckRank(job_rank, pipeline_ranks, replicas); !s.ok()) return s;
  if (pipeline_ranks == 1) {
    return absl::NotFoundError("a pipeline of one rank has no pipeline group");
  }
  return NcclMembership{PipelineGroup(job_rank / pipeline_ranks, pipeline_ranks),
                        job_rank % pipeline_ranks};
}

absl::StatusOr<NcclMembership> StageGroupOf(int job_rank, int pipeline_ranks, int replicas) {
  if (absl::Status s = CheckRank(job_rank, pipeline_ranks, replicas); !s.ok()) return s;
  if (replicas == 1) return absl::NotFoundError("one replica has no stage group");
  return NcclMembership{StageGroup(job_rank % pipeline_ranks, pipeline_ranks, replicas),
                        job_rank / pipeline_ranks};
}

}  // namespace pipetrain
