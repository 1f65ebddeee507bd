// The memory a rank must hold, as Prepare checks it: a later data-parallel replica also buffers
// its microbatches' weight gradients until the running sum arrives; replica 0 does not.
#include "worker/runtime/rank_memory.h"

#include "gtest/gtest.h"
#include "model/cost_model.h"

namespace pipetrain::worker {
namespace {

// Replica `replica` of a d = 2 job: 2 pipeline ranks, 4 stages (2 per rank), 4 microbatches per
// replica; this rank holds stages 0 and 3 (a V placement).
v1::PrepareRequest Request(int replica) {
  v1::PrepareRequest request;
  request.set_rank(0);
  request.set_replica(replica);
  request.mutable_spec()->mutable_training()->set_microbatch_size(2);
  request.mutable_plan()->set_num_microbatches(4);
  request.mutable_plan()->mutable_prediction()->add_peak_activation_bytes(1000);
  request.mutable_plan()->mutable_prediction()->add_peak_activation_bytes(2000);
  return request;
}

model::GptConfig Config() {
  model::GptConfig config;
  config.num_layers = 4;
  config.hidden = 16;
  config.heads = 2;
  config.ffn = 32;
  config.vocab = 64;
  config.seq_len = 8;
  return config;
}

TEST(RankMemoryTest, ALaterReplicaCountsItsBufferedGradients) {
  const model::GptConfig config = Config();
  const std::vector<model::ChunkSpec> split = model::SplitEvenly(config, 4).value();
  int64_t params = 0, state = 0;
  for (int s : {0, 3}) {
    const model::ChunkCost cost = model::EstimateChunkCost(config, split[s], 2);
    params += cost.parameter_bytes;
    state += cost.parameter_state_bytes;
  }
  ASSERT_GT(params, 0);
  const RankMemory first = EstimateRankMemory(Request(0), config, {0, 3}, 4).value();
  EXPECT_EQ(first.parameter_state_bytes, state);
  EXPECT_EQ(first.buffered_gradient_bytes, 0);
  EXPECT_EQ(first.activation_bytes, 1000);  // pipeline rank 0's predicted peak
  EXPECT_EQ(first.total(), state + 1000);
  // Replica 1: 4 microbatches' gradients of both stages held until replica 0's sum arrives.
  const RankMemory later = EstimateRankMemory(Request(1), config, {0, 3}, 4).value();
  EXPECT_EQ(later.buffered_gradient_bytes, 4 * params);
  EXPECT_EQ(later.total(), state + 4 * params + 1000);
}

}  // namespace
}  // namespace pipetrain::worker
