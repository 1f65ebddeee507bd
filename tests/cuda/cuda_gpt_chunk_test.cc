// A whole GPT chunk (embedding, 2 transformer blocks, final layernorm, LM head and loss) on the
// CUDA backend against the same chunk on the CPU backend: F, B and W for three microbatches with
// W in reverse order, then one AdamW step. Same seed, so the same initial weights. Skipped
// without a CUDA device.
// Tolerance: fp32 with different summation orders, compounded through two blocks:
// |cuda - cpu| <= 1e-4 + 1e-3 |cpu| for the weight gradients, 1e-4 on the losses, equal
// predictions, and 2e-4 + 1e-4 |cpu| on the weights after the step. AdamW's first step moves a
// weight by lr * g / (|g| + eps), about lr * sign(g): with a tiny eps a near-zero gradient whose
// sign differs between backends would move a weight by 2 lr, so eps is 1e-3 here, which makes the
// step continuous in g (a gradient difference d moves the weight by at most lr * d / eps = d).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/model/model_test_util.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain::model {
namespace {

using kernels::Tensor;

constexpr int kMicrobatches = 3;
constexpr int64_t kBatch = 2;

struct ChunkRun {
  std::vector<double> losses;
  std::vector<std::vector<int32_t>> predictions;
  std::map<std::string, std::vector<float>> grads;
  std::map<std::string, std::vector<float>> values_after_step;
};

ChunkRun RunChunk(kernels::Backend* be, const GptConfig& config) {
  ChunkRun r;
  auto chunk = GptChunk::Create(be, config, WholeModel(config));
  CHECK(chunk.ok()) << chunk.status();
  GptChunk& c = **chunk;
  CHECK(c.ZeroGrad().ok());
  std::vector<std::vector<int32_t>> tokens, targets;
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    tokens.push_back(testing::RandomTokens(kBatch * config.seq_len, config.vocab, 10 + mb));
    targets.push_back(testing::RandomTokens(kBatch * config.seq_len, config.vocab, 20 + mb));
  }
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    ForwardInput in{tokens[mb], Tensor(), targets[mb], 1.0f / kMicrobatches};
    auto out = c.Forward(mb, std::move(in));
    CHECK(out.ok()) << out.status();
    r.losses.push_back(out->loss);
    r.predictions.push_back(out->predictions);
    auto dx = c.BackwardInput(mb, Tensor());
    CHECK(dx.ok()) << dx.status();
  }
  for (int mb = kMicrobatches - 1; mb >= 0; --mb) CHECK(c.BackwardWeight(mb).ok());
  r.grads = testing::Grads(&c);
  kernels::AdamWConfig adam;
  adam.lr = 1e-3f;
  adam.beta1 = 0.9f;
  adam.beta2 = 0.95f;
  adam.eps = 1e-3f;
  adam.weight_decay = 0.1f;
  CHECK(c.OptimizerStep(adam, 1).ok());
  r.values_after_step = testing::Values(&c);
  return r;
}

void ExpectClose(const std::map<std::string, std::vector<float>>& cpu,
                 const std::map<std::string, std::vector<float>>& gpu, double atol, double rtol,
                 const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size());
  for (const auto& [key, want] : cpu) {
    const std::vector<float>& got = gpu.at(key);
    ASSERT_EQ(got.size(), want.size()) << key;
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::abs(got[i] - want[i]) > atol + rtol * std::abs(want[i]) && ++bad <= 3) {
        ADD_FAILURE() << what << " " << key << "[" << i << "] cpu " << want[i] << " cuda "
                      << got[i];
      }
    }
  }
}

TEST(CudaGptChunkTest, TwoBlockChunkForwardBackwardWeightMatchesTheCpu) {
  if (kernels::cuda::CudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device visible (no GPU or no driver)";
  }
  auto gpu = kernels::cuda::CudaBackend::Create({});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  kernels::CpuBackend cpu;
  const GptConfig config = testing::TinyConfig(2);
  const ChunkRun want = RunChunk(&cpu, config);
  const ChunkRun got = RunChunk(gpu->get(), config);
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t mb = 0; mb < want.losses.size(); ++mb) {
    EXPECT_NEAR(got.losses[mb], want.losses[mb], 1e-4) << "microbatch " << mb;
    EXPECT_EQ(got.predictions[mb], want.predictions[mb]) << "microbatch " << mb;
  }
  ExpectClose(want.grads, got.grads, 1e-4, 1e-3, "gradient");
  ExpectClose(want.values_after_step, got.values_after_step, 2e-4, 1e-4, "weight after AdamW");
  // Determinism: the same run on the GPU again is bitwise the same.
  const ChunkRun again = RunChunk(gpu->get(), config);
  EXPECT_EQ(again.losses, got.losses);
  EXPECT_TRUE(again.grads == got.grads) << "two CUDA runs gave different gradients";
}

}  // namespace
}  // namespace pipetrain::model
