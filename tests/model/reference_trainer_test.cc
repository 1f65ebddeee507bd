// The reference trainer learns the default task (2-digit addition) and is reproduced bitwise by a
// hand-pipelined 2-chunk run with W in reverse microbatch order (the oracle property).
#include "worker/model/reference_trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/cpu/cpu_backend.h"
#include "tests/model/model_test_util.h"
#include "worker/data/addition_task.h"

namespace pipetrain::model {
namespace {

using kernels::Tensor;

ReferenceTrainerConfig DefaultConfig(const data::Dataset& ds) {
  ReferenceTrainerConfig c;
  c.model = {2, 64, 4, 256, ds.seq_len(), ds.vocab_size()};
  c.num_microbatches = 4;
  c.microbatch_size = 16;
  c.optimizer.adamw = {
      .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.01f};
  return c;
}

TEST(ReferenceTrainerTest, LearnsTwoDigitAddition) {
  kernels::CpuBackend backend;
  data::AdditionTask task(2, 1234);
  auto trainer = ReferenceTrainer::Create(&backend, &task, DefaultConfig(task));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  double first = 0, last = 0;
  const int kSteps = 450;
  for (int s = 1; s <= kSteps; ++s) {
    auto st = (*trainer)->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_TRUE(std::isfinite(st->loss));
    if (s == 1) first = st->loss;
    if (s > kSteps - 10) last += st->loss / 10;
  }
  auto ev = (*trainer)->Evaluate(4);
  ASSERT_TRUE(ev.ok());
  std::printf("loss %.3f -> %.3f; held-out loss %.3f token acc %.3f exact match %.3f\n", first,
              last, ev->loss, ev->token_accuracy, ev->exact_match);
  EXPECT_NEAR(first, std::log(12.0), 0.3);
  EXPECT_LT(last, 0.5 * first);
  EXPECT_LT(ev->loss, 0.5 * first);
  EXPECT_GT(ev->token_accuracy, 0.6);
  EXPECT_GT(ev->exact_match, 0.2);
}

// bf16 (GEMM inputs rounded to bf16, activations stashed in bf16) trains the same model as fp32
// within a stated tolerance: over 60 steps every loss within 1% of fp32's, and it learns as much.
TEST(ReferenceTrainerTest, Bf16TracksFp32) {
  data::AdditionTask task(2, 1234);
  kernels::CpuBackend f32_backend;
  kernels::CpuBackend bf16_backend({.bf16_gemm = true});
  ReferenceTrainerConfig bf16_config = DefaultConfig(task);
  bf16_config.stash_bf16 = true;
  auto f32 = *ReferenceTrainer::Create(&f32_backend, &task, DefaultConfig(task));
  auto bf16 = *ReferenceTrainer::Create(&bf16_backend, &task, bf16_config);
  double worst = 0;
  double f32_last = 0, bf16_last = 0;
  for (int s = 0; s < 60; ++s) {
    auto a = f32->Step();
    auto b = bf16->Step();
    ASSERT_TRUE(a.ok() && b.ok());
    if (s == 0) {
      EXPECT_NE(a->loss, b->loss) << "bf16 must round somewhere";
    }
    worst = std::max(worst, std::abs(b->loss - a->loss) / a->loss);
    f32_last = a->loss;
    bf16_last = b->loss;
  }
  std::printf("bf16 vs fp32: worst relative loss difference %.4f; last %.4f vs %.4f\n", worst,
              bf16_last, f32_last);
  EXPECT_LT(worst, 0.01);  // measured: 0.0013
}

TEST(ReferenceTrainerTest, PipelinedRunWithReorderedWReproducesWeightsBitwise) {
  kernels::CpuBackend backend;
  data::AdditionTask task(2, 7);
  ReferenceTrainerConfig cfg = DefaultConfig(task);
  cfg.model.num_layers = 3;
  cfg.model.hidden = 32;
  cfg.model.ffn = 64;
  cfg.microbatch_size = 4;
  auto trainer = *ReferenceTrainer::Create(&backend, &task, cfg);
  const std::vector<ChunkSpec> specs = *SplitEvenly(cfg.model, 2);
  std::vector<std::unique_ptr<GptChunk>> chunks;
  for (const ChunkSpec& s : specs) {
    chunks.push_back(*GptChunk::Create(&backend, cfg.model, s, {.seed = cfg.seed}));
  }
  const int M = cfg.num_microbatches;
  for (int step = 1; step <= 3; ++step) {
    auto ref = trainer->Step();
    ASSERT_TRUE(ref.ok());
    double loss = 0;
    for (auto& c : chunks) ASSERT_TRUE(c->ZeroGrad().ok());
    std::vector<data::Microbatch> mbs;
    for (int m = 0; m < M; ++m) mbs.push_back(task.Get(step, m, cfg.microbatch_size));
    for (int m = 0; m < M; ++m) {
      auto a = chunks[0]->Forward(m, {mbs[m].tokens, Tensor(), {}, 1.0f});
      ASSERT_TRUE(a.ok());
      auto b = chunks[1]->Forward(
          m, {{}, std::move(a->activation), mbs[m].targets, 1.0f / static_cast<float>(M)});
      ASSERT_TRUE(b.ok());
      loss += b->loss / M;
    }
    for (int m = M - 1; m >= 0; --m) {  // B in reverse, then W in a scrambled order
      auto g = chunks[1]->BackwardInput(m, Tensor());
      ASSERT_TRUE(g.ok());
      ASSERT_TRUE(chunks[0]->BackwardInput(m, *std::move(g)).ok());
    }
    for (int m : {2, 0, 3, 1}) {
      for (auto& c : chunks) ASSERT_TRUE(c->BackwardWeight(m).ok());
    }
    for (auto& c : chunks) ASSERT_TRUE(c->OptimizerStep(cfg.optimizer, step).ok());
    EXPECT_EQ(loss, ref->loss) << "step " << step;
  }
  std::map<std::string, std::vector<float>> split;
  for (auto& c : chunks) {
    for (auto& [k, v] : testing::Values(c.get())) split[k] = v;
  }
  EXPECT_TRUE(split == testing::Values(trainer->model()));
}

}  // namespace
}  // namespace pipetrain::model
