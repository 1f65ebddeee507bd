// Gradient clipping by the global norm (worker/model/gradient_clipping.h): the verdict's
// arithmetic (PyTorch's coefficient, 0 = off, non-finite = skip), the summation order that
// makes any split of the model add up bitwise like the whole, the reference trainer's clipped
// step (gradients scaled, then AdamW), and the copy a rolled-back update is restored from.
#include "worker/model/gradient_clipping.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/model/model_test_util.h"
#include "worker/data/addition_task.h"
#include "worker/model/reference_trainer.h"

namespace pipetrain::model {
namespace {

using kernels::Tensor;

TEST(DecideClipTest, CoefficientIsPyTorchsAndZeroMeansOff) {
  ClipVerdict v = DecideClip(16.0, 0.0);  // norm 4, no clipping
  EXPECT_EQ(v.norm, 4.0);
  EXPECT_TRUE(v.finite);
  EXPECT_EQ(v.scale, 1.0f);
  EXPECT_FALSE(v.clipped);
  v = DecideClip(16.0, 5.0);  // under the threshold
  EXPECT_EQ(v.scale, 1.0f);
  EXPECT_FALSE(v.clipped);
  v = DecideClip(16.0, 1.0);  // over it: 1 / (4 + 1e-6), as a float
  EXPECT_EQ(v.scale, static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_TRUE(v.clipped);
  // At the threshold PyTorch's epsilon still scales by 1 - 2.5e-7 (a float below 1); just above
  // it (by the epsilon) the coefficient is exactly 1.
  v = DecideClip(16.0, 4.0);
  EXPECT_LT(v.scale, 1.0f);
  EXPECT_TRUE(v.clipped);
  v = DecideClip(16.0, 4.0 + 1e-6);
  EXPECT_EQ(v.scale, 1.0f);
  EXPECT_FALSE(v.clipped);
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    v = DecideClip(bad, 1.0);
    EXPECT_FALSE(v.finite);
    EXPECT_FALSE(v.clipped);
  }
}

TEST(DecideClipTest, SumsFromTheLastTermToTheFirst) {
  // 1 + 1e-16 + 1e-16 differs by order: first-to-last gives 1, last-to-first 1 + 2e-16.
  const std::vector<double> terms = {1.0, 1e-16, 1e-16};
  EXPECT_EQ(AddSquaresLastFirst(terms, 0.0), (1e-16 + 1e-16) + 1.0);
  EXPECT_NE(AddSquaresLastFirst(terms, 0.0), (1.0 + 1e-16) + 1e-16);
  // A running sum handed on continues the same sequence: split anywhere, same bits.
  EXPECT_EQ(AddSquaresLastFirst({1.0}, AddSquaresLastFirst({1e-16, 1e-16}, 0.0)),
            AddSquaresLastFirst(terms, 0.0));
}

// The whole model's terms, added last to first, equal the stages' terms handed down the stage
// chain (the pipeline's order) bit for bit, for any split.
TEST(GradientSquaresTest, AnySplitAddsUpLikeTheWholeModel) {
  kernels::CpuBackend backend;
  const GptConfig config = testing::TinyConfig(4);
  auto whole = GptChunk::Create(&backend, config, WholeModel(config));
  ASSERT_TRUE(whole.ok()) << whole.status();
  // Gradients: a fixed pseudo-random fill, keyed by (global layer, name) so every split sees
  // the same values.
  auto fill = [&](GptChunk& c) {
    for (Parameter* p : c.parameters()) {
      const std::vector<float> g = NormalValues(7, p->global_layer, p->name, p->grad.numel(), 0.3f);
      ASSERT_TRUE(backend.Upload(g, &p->grad).ok());
    }
  };
  fill(**whole);
  auto whole_terms = (*whole)->GradientSquares();
  ASSERT_TRUE(whole_terms.ok()) << whole_terms.status();
  const double expected = AddSquaresLastFirst(*whole_terms, 0.0);
  EXPECT_GT(expected, 0.0);
  for (int stages : {2, 3, 4}) {
    const std::vector<ChunkSpec> specs = *SplitEvenly(config, stages);
    double running = 0;
    for (int s = stages - 1; s >= 0; --s) {
      auto chunk = GptChunk::Create(&backend, config, specs[s]);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      fill(**chunk);
      auto terms = (*chunk)->GradientSquares();
      ASSERT_TRUE(terms.ok()) << terms.status();
      running = AddSquaresLastFirst(*terms, running);
    }
    EXPECT_EQ(std::memcmp(&running, &expected, sizeof(double)), 0) << stages << " stages";
  }
}

TEST(ClipAndStepTest, ScalesTheGradientsThenSteps) {
  kernels::CpuBackend backend;
  const GptConfig config = testing::TinyConfig(2);
  OptimizerSettings settings;
  settings.adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  auto fill = [&](GptChunk& c) {
    for (Parameter* p : c.parameters()) {
      const std::vector<float> g = NormalValues(9, p->global_layer, p->name, p->grad.numel(), 1.0f);
      ASSERT_TRUE(backend.Upload(g, &p->grad).ok());
    }
  };
  auto clipped = GptChunk::Create(&backend, config, WholeModel(config));
  auto by_hand = GptChunk::Create(&backend, config, WholeModel(config));
  ASSERT_TRUE(clipped.ok() && by_hand.ok());
  fill(**clipped);
  fill(**by_hand);
  const double sum = AddSquaresLastFirst(*(*by_hand)->GradientSquares(), 0.0);
  settings.clip_grad_norm = std::sqrt(sum) / 8;  // well over the threshold
  auto verdict = ClipAndStep(**clipped, settings, 1);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_TRUE(verdict->clipped);
  EXPECT_EQ(verdict->norm, std::sqrt(sum));
  EXPECT_EQ(verdict->scale, static_cast<float>(settings.clip_grad_norm / (std::sqrt(sum) + 1e-6)));
  ASSERT_TRUE((*by_hand)->ScaleGradients(verdict->scale).ok());
  ASSERT_TRUE((*by_hand)->OptimizerStep(settings, 1).ok());
  const std::vector<Parameter*> a = (*clipped)->parameters(), b = (*by_hand)->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(*backend.ToVector(a[i]->value), *backend.ToVector(b[i]->value)) << a[i]->name;
    EXPECT_EQ(*backend.ToVector(a[i]->grad), *backend.ToVector(b[i]->grad)) << a[i]->name;
  }
  // The scaled gradients' norm is the threshold (to float rounding).
  const double after = std::sqrt(AddSquaresLastFirst(*(*clipped)->GradientSquares(), 0.0));
  EXPECT_NEAR(after, settings.clip_grad_norm, 1e-5 * settings.clip_grad_norm);
  // A NaN skips the step: nothing changes.
  std::vector<float> g = *backend.ToVector(a[0]->grad);
  g[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(backend.Upload(g, &a[0]->grad).ok());
  const std::vector<float> before = *backend.ToVector(a[1]->value);
  verdict = ClipAndStep(**clipped, settings, 2);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_FALSE(verdict->finite);
  EXPECT_EQ(*backend.ToVector(a[1]->value), before);
}

// The rollback of a post-validated update: restore brings back values and moments bitwise.
TEST(OptimizerStateCopyTest, RestoreUndoesAnUpdateBitwise) {
  kernels::CpuBackend backend;
  const GptConfig config = testing::TinyConfig(2);
  auto chunk = GptChunk::Create(&backend, config, WholeModel(config));
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  OptimizerSettings settings;
  settings.adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  for (Parameter* p : (*chunk)->parameters()) {
    ASSERT_TRUE(
        backend.Upload(NormalValues(3, p->global_layer, p->name, p->grad.numel(), 1.0f), &p->grad)
            .ok());
  }
  ASSERT_TRUE((*chunk)->OptimizerStep(settings, 1).ok());  // non-zero moments
  auto state = [&] {
    std::vector<std::vector<float>> out;
    for (Parameter* p : (*chunk)->parameters()) {
      for (const Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
        out.push_back(*backend.ToVector(*t));
      }
    }
    return out;
  };
  const std::vector<std::vector<float>> saved_state = state();
  std::vector<Tensor> copy;
  const int64_t before = backend.device_allocator().current_bytes();
  ASSERT_TRUE((*chunk)->SaveOptimizerState(&copy).ok());
  // Three floats per parameter element, from the counted device allocator.
  EXPECT_EQ(backend.device_allocator().current_bytes() - before,
            3 * (*chunk)->ParameterStateBytes() / 4);
  ASSERT_TRUE((*chunk)->OptimizerStep(settings, 2).ok());
  EXPECT_NE(state(), saved_state);
  ASSERT_TRUE((*chunk)->RestoreOptimizerState(copy).ok());
  EXPECT_EQ(state(), saved_state);
  // The copy is reused: saving again allocates nothing.
  const int64_t held = backend.device_allocator().current_bytes();
  ASSERT_TRUE((*chunk)->SaveOptimizerState(&copy).ok());
  EXPECT_EQ(backend.device_allocator().current_bytes(), held);
}

TEST(ReferenceTrainerClipTest, ReportsTheNormAndClipsOverTheThreshold) {
  kernels::CpuBackend backend;
  data::AdditionTask task(2, 3);
  ReferenceTrainerConfig cfg;
  cfg.model = {2, 16, 2, 32, task.seq_len(), task.vocab_size()};
  cfg.num_microbatches = 2;
  cfg.microbatch_size = 4;
  cfg.optimizer.adamw = {
      .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  auto unclipped = ReferenceTrainer::Create(&backend, &task, cfg);
  ASSERT_TRUE(unclipped.ok()) << unclipped.status();
  absl::StatusOr<StepStats> st = (*unclipped)->Step();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_GT(st->grad_norm, 0.0);
  EXPECT_FALSE(st->grad_clipped);
  cfg.optimizer.clip_grad_norm = st->grad_norm / 2;
  auto clipped = ReferenceTrainer::Create(&backend, &task, cfg);
  ASSERT_TRUE(clipped.ok()) << clipped.status();
  absl::StatusOr<StepStats> st2 = (*clipped)->Step();
  ASSERT_TRUE(st2.ok()) << st2.status();
  EXPECT_EQ(st2->grad_norm, st->grad_norm);  // measured before clipping
  EXPECT_TRUE(st2->grad_clipped);
  EXPECT_EQ(st2->loss, st->loss);
  EXPECT_NE(*backend.ToVector((*clipped)->model()->parameters()[0]->value),
            *backend.ToVector((*unclipped)->model()->parameters()[0]->value));
}

}  // namespace
}  // namespace pipetrain::model
