// Splitting the model into 1..4 chunks and chaining F/B/W by hand reproduces the unsplit model's
// loss and gradients bitwise (deterministic, partition-independent initialisation and
// microbatch-ordered gradient accumulation, with W deliberately run in reverse microbatch order).
// Also: analytic activation bytes vs the counting allocator, offload/reload, protocol errors.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/cost_model.h"
#include "tests/model/model_test_util.h"

namespace pipetrain::model {
namespace {

using kernels::Tensor;

constexpr int kMicrobatches = 3;
constexpr int64_t kBatch = 2;

struct RunResult {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> grads;
};

std::vector<int32_t> Tokens(const GptConfig& c, int mb) {
  return testing::RandomTokens(kBatch * c.seq_len, c.vocab, 100 + mb);
}
std::vector<int32_t> Targets(const GptConfig& c, int mb) {
  return testing::RandomTokens(kBatch * c.seq_len, c.vocab, 200 + mb);
}

// Unsplit reference: F then BW per microbatch, in order.
RunResult RunWhole(kernels::Backend* be, const GptConfig& config) {
  auto chunk = *GptChunk::Create(be, config, WholeModel(config));
  RunResult r;
  CHECK(chunk->ZeroGrad().ok());
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    const auto tokens = Tokens(config, mb), targets = Targets(config, mb);
    ForwardInput in{tokens, Tensor(), targets, 1.0f / kMicrobatches};
    auto out = chunk->Forward(mb, std::move(in));
    CHECK(out.ok()) << out.status();
    r.losses.push_back(out->loss);
    CHECK(chunk->Backward(mb, Tensor()).ok());
  }
  r.grads = testing::Grads(chunk.get());
  return r;
}

// Pipelined by hand: all F (chunk order), then all B (reverse chunk order), then W in reverse
// microbatch order on every chunk.
RunResult RunSplit(kernels::Backend* be, const GptConfig& config, int num_chunks,
                   GradAccumulation mode) {
  std::vector<std::unique_ptr<GptChunk>> chunks;
  const std::vector<ChunkSpec> specs = *SplitEvenly(config, num_chunks);
  for (const ChunkSpec& spec : specs) {
    chunks.push_back(*GptChunk::Create(be, config, spec, {.grad_accumulation = mode}));
    CHECK(chunks.back()->ZeroGrad().ok());
  }
  RunResult r;
  std::vector<std::vector<int32_t>> tokens, targets;
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    tokens.push_back(Tokens(config, mb));
    targets.push_back(Targets(config, mb));
  }
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    Tensor act;
    for (auto& c : chunks) {
      ForwardInput in;
      if (c->spec().has_embedding)
        in.tokens = tokens[mb];
      else
        in.activation = std::move(act);
      if (c->spec().has_head) {
        in.targets = targets[mb];
        in.loss_scale = 1.0f / kMicrobatches;
      }
      auto out = c->Forward(mb, std::move(in));
      CHECK(out.ok()) << out.status();
      if (c->spec().has_head) r.losses.push_back(out->loss);
      act = std::move(out->activation);
    }
  }
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    Tensor grad;
    for (size_t i = chunks.size(); i-- > 0;) {
      auto dx = chunks[i]->BackwardInput(mb, std::move(grad));
      CHECK(dx.ok()) << dx.status();
      grad = *std::move(dx);
    }
    EXPECT_TRUE(grad.empty());
  }
  for (int mb = kMicrobatches - 1; mb >= 0; --mb) {
    for (auto& c : chunks) CHECK(c->BackwardWeight(mb).ok());
  }
  for (auto& c : chunks) {
    EXPECT_TRUE(c->InFlightMicrobatches().empty());
    for (auto& [k, g] : testing::Grads(c.get())) r.grads[k] = g;
  }
  return r;
}

TEST(ChunkSplitTest, OneToFourChunksMatchUnsplitModelBitwise) {
  kernels::CpuBackend be;
  const GptConfig config = testing::TinyConfig(4);
  const RunResult whole = RunWhole(&be, config);
  double total = 0;
  for (double l : whole.losses) total += l / kMicrobatches;
  EXPECT_NEAR(total, std::log(config.vocab), 0.5);  // untrained model: ~uniform predictions
  for (int k = 1; k <= 4; ++k) {
    SCOPED_TRACE(k);
    const RunResult split = RunSplit(&be, config, k, GradAccumulation::kMicrobatchOrdered);
    EXPECT_EQ(split.losses, whole.losses);
    ASSERT_EQ(split.grads.size(), whole.grads.size());
    EXPECT_TRUE(split.grads == whole.grads) << "gradients differ for " << k << " chunks";
  }
}

TEST(ChunkSplitTest, DirectAccumulationInOtherOrderIsCloseButNotRequiredBitwise) {
  kernels::CpuBackend be;
  const GptConfig config = testing::TinyConfig(4);
  const RunResult whole = RunWhole(&be, config);
  const RunResult split = RunSplit(&be, config, 2, GradAccumulation::kDirect);
  EXPECT_EQ(split.losses, whole.losses);
  for (const auto& [k, g] : whole.grads) {
    const auto& s = split.grads.at(k);
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(s[i], g[i], 1e-6 + 1e-5 * std::abs(g[i])) << k << "[" << i << "]";
    }
  }
}

TEST(ChunkSplitTest, InitialisationIsPartitionIndependent) {
  kernels::CpuBackend be;
  const GptConfig config = testing::TinyConfig(4);
  auto whole = *GptChunk::Create(&be, config, WholeModel(config));
  const auto want = testing::Values(whole.get());
  std::map<std::string, std::vector<float>> got;
  const std::vector<ChunkSpec> specs = *SplitEvenly(config, 3);
  for (const ChunkSpec& spec : specs) {
    auto c = *GptChunk::Create(&be, config, spec);
    for (auto& [k, v] : testing::Values(c.get())) got[k] = v;
  }
  EXPECT_TRUE(got == want);
  auto other_seed = *GptChunk::Create(&be, config, WholeModel(config), {.seed = 7});
  EXPECT_FALSE(testing::Values(other_seed.get()) == want);
}

// Device bytes counted by the allocator after F, B and W of one microbatch equal the analytic
// figures of the cost model, for first, middle and last chunks, with an f32 stash and a bf16 one
// (2 bytes per element but the LayerNorm statistics).
class ChunkStashMemoryTest : public ::testing::TestWithParam<bool> {};

TEST_P(ChunkStashMemoryTest, AnalyticActivationBytesMatchAllocator) {
  const bool bf16 = GetParam();
  kernels::CpuBackend be({.bf16_gemm = bf16});
  GptConfig config = testing::TinyConfig(4);
  config.seq_len = 8;
  for (const ChunkSpec& spec : {ChunkSpec{0, 2, true, false}, ChunkSpec{2, 1, false, false},
                                ChunkSpec{3, 1, false, true}, WholeModel(config)}) {
    SCOPED_TRACE(spec.DebugString());
    auto chunk = *GptChunk::Create(&be, config, spec, {.stash_bf16 = bf16});
    const ChunkCost cost = EstimateChunkCost(config, spec, kBatch, bf16 ? 2 : 4);
    if (bf16) {  // about half of the f32 stash: all but the [N] statistics halve
      const ChunkCost f32 = EstimateChunkCost(config, spec, kBatch);
      const int64_t stats = 4 * kBatch * config.seq_len *
                            (4 * spec.num_blocks + (spec.has_head ? 2 : 0));
      EXPECT_EQ(2 * (cost.activation_bytes_after_forward - stats),
                f32.activation_bytes_after_forward - stats);
    }
    EXPECT_EQ(chunk->ParameterStateBytes(), cost.parameter_state_bytes);
    const int64_t n = kBatch * config.seq_len;
    const auto tokens = Tokens(config, 0), targets = Targets(config, 0);
    const int64_t base = be.device_allocator().current_bytes();
    ForwardInput in;
    if (spec.has_embedding)
      in.tokens = tokens;
    else
      in.activation = *be.Zeros({n, config.hidden}, "received activation");
    if (spec.has_head) in.targets = targets;
    auto out = chunk->Forward(0, std::move(in));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->activation.bytes(), cost.output_activation_bytes);
    out->activation.Reset();  // sent downstream
    EXPECT_EQ(be.device_allocator().current_bytes() - base, cost.activation_bytes_after_forward);
    EXPECT_EQ(chunk->ActivationBytes(0), cost.activation_bytes_after_forward);
    Tensor dy;
    if (!spec.has_head) dy = *be.Zeros({n, config.hidden}, "received gradient");
    auto dx = chunk->BackwardInput(0, std::move(dy));
    ASSERT_TRUE(dx.ok()) << dx.status();
    EXPECT_EQ(dx->bytes(), cost.input_gradient_bytes);
    dx->Reset();
    EXPECT_EQ(be.device_allocator().current_bytes() - base,
              cost.activation_bytes_after_backward_input);
    EXPECT_EQ(chunk->ActivationBytes(0), cost.activation_bytes_after_backward_input);
    ASSERT_TRUE(chunk->BackwardWeight(0).ok());
    EXPECT_EQ(be.device_allocator().current_bytes() - base,
              cost.activation_bytes_after_backward_weight);
    EXPECT_GT(cost.forward_flops, 0);
  }
}

// Offload moves the stash (bf16 too) to the host and back; BW gives bitwise B then W's gradients.
TEST_P(ChunkStashMemoryTest, OffloadReloadMovesBytesAndPreservesResults) {
  const bool bf16 = GetParam();
  kernels::CpuBackend be({.bf16_gemm = bf16});
  const GptConfig config = testing::TinyConfig(2);
  auto plain = *GptChunk::Create(&be, config, WholeModel(config), {.stash_bf16 = bf16});
  auto offl = *GptChunk::Create(&be, config, WholeModel(config), {.stash_bf16 = bf16});
  const auto tokens = Tokens(config, 0), targets = Targets(config, 0);
  for (GptChunk* c : {plain.get(), offl.get()}) {
    ASSERT_TRUE(c->ZeroGrad().ok());
    ASSERT_TRUE(c->Forward(0, {tokens, Tensor(), targets, 1.0f}).ok());
  }
  const int64_t act = offl->ActivationBytes(0);
  const int64_t dev = be.device_allocator().current_bytes();
  ASSERT_TRUE(offl->Offload(0).ok());
  EXPECT_TRUE(offl->IsOffloaded(0));
  EXPECT_EQ(offl->ActivationBytes(0), 0);
  EXPECT_EQ(offl->OffloadedBytes(0), act);
  EXPECT_EQ(be.device_allocator().current_bytes(), dev - act);
  EXPECT_EQ(be.host_allocator().current_bytes(), act);
  EXPECT_EQ(offl->BackwardInput(0, Tensor()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(offl->Reload(0).ok());
  EXPECT_EQ(be.host_allocator().current_bytes(), 0);
  EXPECT_EQ(offl->ActivationBytes(0), act);
  ASSERT_TRUE(plain->Backward(0, Tensor()).ok());
  ASSERT_TRUE(offl->BackwardInput(0, Tensor()).ok());
  ASSERT_TRUE(offl->Offload(0).ok());  // offload between B and W too
  ASSERT_TRUE(offl->Reload(0).ok());
  ASSERT_TRUE(offl->BackwardWeight(0).ok());
  EXPECT_TRUE(testing::Grads(plain.get()) == testing::Grads(offl.get()));
}

INSTANTIATE_TEST_SUITE_P(Stash, ChunkStashMemoryTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "bf16" : "f32");
                         });

TEST(ChunkProtocolTest, RejectsOutOfOrderActions) {
  kernels::CpuBackend be;
  const GptConfig config = testing::TinyConfig(2);
  auto c = *GptChunk::Create(&be, config, WholeModel(config));
  const auto tokens = Tokens(config, 0), targets = Targets(config, 0);
  EXPECT_EQ(c->BackwardInput(0, Tensor()).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c->Forward(0, {tokens, Tensor(), targets, 1.0f}).ok());
  EXPECT_EQ(c->Forward(0, {tokens, Tensor(), targets, 1.0f}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->BackwardWeight(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->Offload(5).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(c->ZeroGrad().ok());
  // Ordered accumulation: microbatch 1's W is buffered until microbatch 0's has run.
  ASSERT_TRUE(c->Forward(1, {tokens, Tensor(), targets, 1.0f}).ok());
  ASSERT_TRUE(c->Backward(1, Tensor()).ok());
  EXPECT_EQ(c->OptimizerStep(kernels::AdamWConfig{}, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c->Backward(0, Tensor()).ok());
  EXPECT_TRUE(c->OptimizerStep(kernels::AdamWConfig{}, 1).ok());
  GptConfig bad = config;
  bad.heads = 3;
  EXPECT_EQ(GptChunk::Create(&be, bad, WholeModel(bad)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::model
