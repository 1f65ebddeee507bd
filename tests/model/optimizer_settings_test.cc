// The optimizer step's recipe on real chunks: which parameters each weight-decay group holds
// (by kind and by name), that OptimizerStep decays exactly those at the schedule's rate, that
// GradientsFinite sees a single NaN or Inf, and that the reference trainer skips such a step's
// update and counts it.
#include "worker/model/optimizer_settings.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "tests/model/model_test_util.h"
#include "worker/data/addition_task.h"
#include "worker/model/gpt_chunk.h"
#include "worker/model/reference_trainer.h"

namespace pipetrain::model {
namespace {

using kernels::Tensor;

TEST(WeightDecayGroupsTest, DecaysWeightByKind) {
  const WeightDecayGroups none, embeddings{.embeddings = true, .norms_and_biases = false},
      norms{.embeddings = false, .norms_and_biases = true};
  EXPECT_TRUE(DecaysWeight(ParameterKind::kLinearWeight, none));
  EXPECT_FALSE(DecaysWeight(ParameterKind::kEmbedding, none));
  EXPECT_FALSE(DecaysWeight(ParameterKind::kNorm, none));
  EXPECT_FALSE(DecaysWeight(ParameterKind::kBias, none));
  EXPECT_TRUE(DecaysWeight(ParameterKind::kEmbedding, embeddings));
  EXPECT_FALSE(DecaysWeight(ParameterKind::kNorm, embeddings));
  EXPECT_TRUE(DecaysWeight(ParameterKind::kNorm, norms));
  EXPECT_TRUE(DecaysWeight(ParameterKind::kBias, norms));
  EXPECT_FALSE(DecaysWeight(ParameterKind::kEmbedding, norms));
}

// Names (without the layer) of the whole model's parameters that decay under `groups`.
std::set<std::string> DecayedNames(GptChunk& chunk, const WeightDecayGroups& groups) {
  std::set<std::string> out;
  for (Parameter* p : chunk.parameters()) {
    if (DecaysWeight(p->kind, groups)) out.insert(p->name);
  }
  return out;
}

TEST(WeightDecayGroupsTest, WhichParametersDecay) {
  kernels::CpuBackend backend;
  const GptConfig config = testing::TinyConfig(2);
  auto chunk = GptChunk::Create(&backend, config, WholeModel(config));
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  const std::set<std::string> linear = {"attn.qkv.weight", "attn.proj.weight", "mlp.fc.weight",
                                        "mlp.proj.weight", "lm_head.weight"};
  EXPECT_EQ(DecayedNames(**chunk, {}), linear);
  std::set<std::string> with_embeddings = linear;
  with_embeddings.insert({"wte", "wpe"});
  EXPECT_EQ(DecayedNames(**chunk, {.embeddings = true, .norms_and_biases = false}),
            with_embeddings);
  std::set<std::string> with_norms = linear;
  with_norms.insert({"ln1.gamma", "ln1.beta", "ln2.gamma", "ln2.beta", "lnf.gamma", "lnf.beta",
                     "attn.qkv.bias", "attn.proj.bias", "mlp.fc.bias", "mlp.proj.bias"});
  EXPECT_EQ(DecayedNames(**chunk, {.embeddings = false, .norms_and_biases = true}), with_norms);
  // Every parameter has the kind its name says.
  for (Parameter* p : (*chunk)->parameters()) {
    const std::string& n = p->name;
    const ParameterKind want =
        n == "wte" || n == "wpe" ? ParameterKind::kEmbedding
        : n.find("gamma") != std::string::npos || n.find("beta") != std::string::npos
            ? ParameterKind::kNorm
        : n.find(".bias") != std::string::npos ? ParameterKind::kBias
                                               : ParameterKind::kLinearWeight;
    EXPECT_EQ(p->kind, want) << n;
  }
}

// With zero gradients AdamW's moments stay 0, so a step only decays: p <- p - lr * wd * p. Each
// parameter must move exactly when its group decays, at the schedule's rate for the step.
TEST(WeightDecayGroupsTest, OptimizerStepDecaysTheGroupsAtTheScheduledRate) {
  for (const WeightDecayGroups groups :
       {WeightDecayGroups{}, WeightDecayGroups{.embeddings = true, .norms_and_biases = false},
        WeightDecayGroups{.embeddings = true, .norms_and_biases = true}}) {
    kernels::CpuBackend backend;
    const GptConfig config = testing::TinyConfig(2);
    auto chunk = GptChunk::Create(&backend, config, WholeModel(config));
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    std::vector<Parameter*> params = (*chunk)->parameters();
    // Non-zero values everywhere (biases and LayerNorm shifts start at 0).
    for (Parameter* p : params) {
      std::vector<float> v(static_cast<size_t>(p->value.numel()), 0.5f);
      ASSERT_TRUE(backend.Upload(v, &p->value).ok());
    }
    ASSERT_TRUE((*chunk)->ZeroGrad().ok());
    OptimizerSettings settings;
    settings.adamw = {
        .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f};
    settings.lr_schedule = {LrScheduleKind::kCosine, /*warmup=*/4, /*total=*/10, 0.0};
    settings.decay = groups;
    ASSERT_TRUE((*chunk)->OptimizerStep(settings, /*step=*/1).ok());
    const float lr = 0.1f / 4;  // step 1 of a 4-step warmup
    for (Parameter* p : params) {
      const std::vector<float> v = *backend.ToVector(p->value);
      const float want = DecaysWeight(p->kind, groups) ? 0.5f - lr * (0.5f * 0.5f) : 0.5f;
      EXPECT_FLOAT_EQ(v[0], want) << p->name;
      EXPECT_FLOAT_EQ(v.back(), want) << p->name;
    }
  }
}

TEST(GradientsFiniteTest, OneNanOrInfAnywhereIsSeen) {
  kernels::CpuBackend backend;
  const GptConfig config = testing::TinyConfig(2);
  const std::vector<ChunkSpec> specs = *SplitEvenly(config, 2);
  auto chunk = GptChunk::Create(&backend, config, specs[1]);  // blocks + head
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  ASSERT_TRUE((*chunk)->ZeroGrad().ok());
  absl::StatusOr<bool> finite = (*chunk)->GradientsFinite();
  ASSERT_TRUE(finite.ok()) << finite.status();
  EXPECT_TRUE(*finite);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (Parameter* p : (*chunk)->parameters()) {
      ASSERT_TRUE((*chunk)->ZeroGrad().ok());
      std::vector<float> g(static_cast<size_t>(p->grad.numel()), 0.0f);
      g[g.size() / 2] = bad;
      ASSERT_TRUE(backend.Upload(g, &p->grad).ok());
      finite = (*chunk)->GradientsFinite();
      ASSERT_TRUE(finite.ok()) << finite.status();
      EXPECT_FALSE(*finite) << p->name << " holds " << bad;
    }
  }
}

TEST(ReferenceTrainerSkipTest, NonFiniteGradientsSkipTheUpdateAndTheStepStillCounts) {
  kernels::CpuBackend backend;
  data::AdditionTask task(2, 3);
  ReferenceTrainerConfig cfg;
  cfg.model = {2, 16, 2, 32, task.seq_len(), task.vocab_size()};
  cfg.num_microbatches = 2;
  cfg.microbatch_size = 4;
  cfg.optimizer.adamw = {
      .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  auto trainer = ReferenceTrainer::Create(&backend, &task, cfg);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::StatusOr<StepStats> st = (*trainer)->Step();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_FALSE(st->update_skipped);
  // A NaN in the final LayerNorm's gain poisons every gradient of the next step.
  std::vector<Parameter*> params = (*trainer)->model()->parameters();
  Parameter* lnf = nullptr;
  for (Parameter* p : params) {
    if (p->name == "lnf.gamma") lnf = p;
  }
  ASSERT_NE(lnf, nullptr);
  std::vector<float> gamma = *backend.ToVector(lnf->value);
  gamma[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(backend.Upload(gamma, &lnf->value).ok());
  std::map<Parameter*, std::vector<float>> before;
  for (Parameter* p : params) {
    for (const Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
      std::vector<float> v = *backend.ToVector(*t);
      before[p].insert(before[p].end(), v.begin(), v.end());
    }
  }
  st = (*trainer)->Step();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(st->update_skipped);
  EXPECT_EQ(st->step, 2);
  EXPECT_EQ((*trainer)->steps_done(), 2);  // counted: the next step is t = 3
  for (Parameter* p : params) {
    std::vector<float> after;
    for (const Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
      std::vector<float> v = *backend.ToVector(*t);
      after.insert(after.end(), v.begin(), v.end());
    }
    ASSERT_EQ(after.size(), before[p].size());
    EXPECT_EQ(std::memcmp(after.data(), before[p].data(), after.size() * sizeof(float)), 0)
        << p->name << " changed in a skipped step";
  }
}

}  // namespace
}  // namespace pipetrain::model
