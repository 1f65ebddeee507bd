// RankMemory: what one worker rank of a job must hold for its stages, estimated before anything
// is allocated (WorkerSession's check at Prepare refuses a rank over its device's or host's
// memory with this breakdown). Besides the parameters with their gradients and AdamW moments and
// the plan's predicted activation peak, a data-parallel rank of replica q > 0 buffers its own
// microbatches' weight gradients until the running sum from the replica before arrives
// (worker/runtime/replica_reducer.h: the chunk's ordered accumulation holds each microbatch's W
// result until every earlier microbatch is added, and microbatch 0 is not this replica's): up to
// k = the plan's microbatches gradient copies of each of its stages. Replica 0 adds in order as
// it goes and buffers none.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_WORKER_RUNTIME_RANK_MEMORY_H_
#define PIPETRAIN_WORKER_RUNTIME_RANK_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gpt_config.h"
#include "pipetrain/v1/worker.pb.h"

namespace pipetrain::worker {

struct RankMemory {
  int64_t parameter_state_bytes = 0;    // parameters, gradients and AdamW moments
  int64_t buffered_gradient_bytes = 0;  // replica > 0: k buffered weight gradients per stage
  int64_t activation_bytes = 0;         // the plan's predicted peak for this pipeline rank
  int64_t total() const {
    return parameter_state_bytes + buffered_gradient_bytes + activation_bytes;
  }
};

// `stages`: the stages this rank holds, of the plan's `num_stages` (the even layer split).
absl::StatusOr<RankMemory> EstimateRankMemory(const v1::PrepareRequest& request,
                                              const model::GptConfig& config,
                                              const std::vector<int>& stages, int num_stages);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_RANK_MEMORY_H_
