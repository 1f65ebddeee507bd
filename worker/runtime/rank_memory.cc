#include "worker/runtime/rank_memory.h"

#include "common/status_macros.h"
#include "model/cost_model.h"

namespace pipetrain::worker {

absl::StatusOr<RankMemory> EstimateRankMemory(const v1::PrepareRequest& request,
                                              const model::GptConfig& config,
                                              const std::vector<int>& stages, int num_stages) {
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> split, model::SplitEvenly(config, num_stages));
  const int64_t microbatch_size = request.spec().training().microbatch_size();
  // Replica q > 0 buffers each of its k microbatches' gradients until the running sum arrives.
  const int64_t buffered = request.replica() > 0 ? request.plan().num_microbatches() : 0;
  RankMemory out;
  for (int s : stages) {
    if (s < 0 || s >= static_cast<int>(split.size())) continue;
    const model::ChunkCost cost = model::EstimateChunkCost(config, split[s], microbatch_size);
    out.parameter_state_bytes += cost.parameter_state_bytes;
    out.buffered_gradient_bytes += buffered * cost.parameter_bytes;
  }
  const auto& peaks = request.plan().prediction().peak_activation_bytes();
  out.activation_bytes = request.rank() < peaks.size() ? peaks[request.rank()] : 0;
  return out;
}

}  // namespace pipetrain::worker
