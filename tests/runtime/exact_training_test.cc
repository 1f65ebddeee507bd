// The correctness bar: pipelined training under every schedule computes the same function as
// single-process training. p workers run as threads with real GPT chunks; after several
// optimizer steps their losses and every weight must be BITWISE equal to one process training
// the whole model with the same data (the chunks accumulate weight gradients in microbatch
// order, so the schedule's W order cannot change rounding). The measured peak activation bytes
// of every worker must equal the simulator's prediction made with the model's analytic bytes.
// Each schedule runs four recipes: a constant rate; the full recipe (warmup, cosine decay,
// every weight-decay group); the full recipe with gradient clipping by the global norm at a
// threshold that clips some steps and not others; and that with a NaN planted in one rank's
// gradients at one step, which every rank (and the reference) must answer by skipping that
// step's update. The ranks update before the step's verdict reaches them (optimizer
// post-validation, worker/runtime/executor.h), so a clipped or skipped step is rolled back or
// deferred on some ranks: the weights must still be bitwise the reference's, and the test
// checks that those paths ran. A fifth recipe adds tied input/output embeddings to the clipped
// one: the head's copy of the token embedding sits on the embedding's worker (V schedules) or on
// another (the two ranks swap gradients each step).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "kernels/cpu/cpu_backend.h"
#include "model/cost_model.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/model/gradient_clipping.h"
#include "worker/runtime/in_process_pipeline.h"
#include "worker/runtime/model_stage_runner.h"

namespace pipetrain::worker {
namespace {

using testing::AccumulateWholeBatch;
using testing::Adam;
using testing::Data;
using testing::ExactByteCosts;
using testing::kMicrobatchSize;
using testing::MakeModelWorkers;
using testing::SmallModel;
using testing::Weights;

constexpr int kSteps = 3;

struct Reference {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;  // parameters() order of the whole model
  std::vector<bool> skipped;                // per step
  std::vector<double> grad_norms;           // per step, before clipping
  std::vector<bool> clipped;                // per step
};

enum class Recipe { kConstant, kScheduled, kClipped, kNonFinite, kTied };

// The rank and step (0-based) whose gradient gets a NaN in kNonFinite, and which parameter: the
// last one of the rank's lowest stage (its global layer and name pick the same one in the whole
// model).
constexpr int kPoisonStep = 1;
int PoisonRank(int p) { return p / 2; }

// The clipping threshold of kClipped and kTied for a model (TrainReference below).
double ClipThreshold(const model::GptConfig& c, int m);

model::OptimizerSettings SettingsOf(Recipe recipe, const model::GptConfig& c, int m) {
  if (recipe == Recipe::kConstant) {
    model::OptimizerSettings constant;
    constant.adamw = Adam();
    return constant;
  }
  model::OptimizerSettings s = testing::Recipe();
  if (recipe == Recipe::kClipped || recipe == Recipe::kTied) {
    s.clip_grad_norm = ClipThreshold(c, m);
  }
  return s;
}

absl::Status Poison(kernels::Backend& backend, model::Parameter* p) {
  std::vector<float> g = *backend.ToVector(p->grad);
  g[g.size() / 2] = std::numeric_limits<float>::quiet_NaN();
  return backend.Upload(g, &p->grad);
}

// Single process, whole model, microbatches in order with fused backward; the update is skipped
// when a gradient is not finite, as in ReferenceTrainer. `poison`: (global layer, name) of the
// parameter whose gradient gets a NaN at kPoisonStep, if any.
Reference TrainReference(const model::GptConfig& c, int m, const model::OptimizerSettings& opt,
                         std::optional<std::pair<int, std::string>> poison) {
  kernels::CpuBackend backend;
  auto chunk = model::GptChunk::Create(&backend, c, model::WholeModel(c));
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  auto data = Data(c);
  Reference ref;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_TRUE((*chunk)->ZeroGrad().ok());
    const absl::StatusOr<double> step_loss = AccumulateWholeBatch(**chunk, data, step, m);
    EXPECT_TRUE(step_loss.ok()) << step_loss.status();
    const double loss = step_loss.value_or(0.0);
    if (poison && step == kPoisonStep) {
      for (model::Parameter* p : (*chunk)->parameters()) {
        if (p->global_layer == poison->first && p->name == poison->second) {
          EXPECT_TRUE(Poison(backend, p).ok());
        }
      }
    }
    const absl::StatusOr<model::ClipVerdict> verdict = model::ClipAndStep(**chunk, opt, step + 1);
    EXPECT_TRUE(verdict.ok()) << verdict.status();
    ref.losses.push_back(loss);
    ref.skipped.push_back(!verdict->finite);
    ref.grad_norms.push_back(verdict->norm);
    ref.clipped.push_back(verdict->clipped);
  }
  ref.weights = Weights(backend, **chunk);
  return ref;
}

// Halfway between the smallest and the largest gradient norm of unclipped training: the first
// steps' norms differ enough that this clips some and not others (asserted by the test).
double ClipThreshold(const model::GptConfig& c, int m) {
  const Reference unclipped = TrainReference(c, m, testing::Recipe(), std::nullopt);
  const auto [lo, hi] =
      std::minmax_element(unclipped.grad_norms.begin(), unclipped.grad_norms.end());
  return (*lo + *hi) / 2;
}

// A real stage runner that plants a NaN in one gradient of its lowest stage before its step's
// finite check.
class PoisoningRunner final : public testing::ForwardingStageRunner {
 public:
  explicit PoisoningRunner(ModelStageRunner* inner, int stage)
      : ForwardingStageRunner(inner), model_(inner), stage_(stage) {}
  absl::Status BeginStep(int step) override {
    step_ = step;
    return ForwardingStageRunner::BeginStep(step);
  }
  absl::StatusOr<bool> SumGradientSquares() override {
    if (step_ == kPoisonStep) {
      absl::Status s = Poison(model_->backend(), model_->chunk(stage_)->parameters().back());
      if (!s.ok()) return s;
    }
    return ForwardingStageRunner::SumGradientSquares();
  }

 private:
  ModelStageRunner* model_;
  int stage_;
  int step_ = -1;
};

struct TrainingCase {
  std::string schedule;
  int p;
  int m;
  Recipe recipe = Recipe::kConstant;
};
void PrintTo(const TrainingCase& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << " m=" << c.m << " recipe " << static_cast<int>(c.recipe);
}

class ExactTrainingTest : public ::testing::TestWithParam<TrainingCase> {};

TEST_P(ExactTrainingTest, PipelinedEqualsSingleProcessBitwise) {
  const TrainingCase& c = GetParam();
  schedule::PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = c.m;
  auto compute = schedule::Generate(c.schedule, spec);
  if (!compute.ok() && compute.status().message().find("unknown schedule") != std::string::npos) {
    GTEST_SKIP() << c.schedule << " is not registered in this build";
  }
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto plan = schedule::AddTransfers(*compute);
  ASSERT_TRUE(plan.ok()) << plan.status();
  model::GptConfig config = SmallModel(plan->num_stages);  // one block per stage
  config.tie_embeddings = c.recipe == Recipe::kTied;

  // Predicted peak activation bytes from the model's analytic stash sizes.
  auto costs = ExactByteCosts(*plan, config);
  ASSERT_TRUE(costs.ok()) << costs.status();
  auto sim = schedule::Simulate(*plan, *costs);
  ASSERT_TRUE(sim.ok()) << sim.status();

  const model::OptimizerSettings settings = SettingsOf(c.recipe, config, c.m);
  auto workers = MakeModelWorkers(*plan, config, c.m, /*copy_bandwidth_bytes_per_s=*/0, settings);
  ASSERT_TRUE(workers.ok()) << workers.status();
  std::vector<std::unique_ptr<kernels::CpuBackend>>& backends = workers->backends;
  std::vector<std::unique_ptr<ModelStageRunner>>& runners = workers->runners;
  std::vector<StageRunner*>& raw = workers->raw;
  std::optional<std::pair<int, std::string>> poison;
  std::unique_ptr<PoisoningRunner> poisoning;
  if (c.recipe == Recipe::kNonFinite) {
    const int r = PoisonRank(c.p);
    int lowest = plan->num_stages;
    for (int s = 0; s < plan->num_stages; ++s) {
      if (plan->WorkerOf(s) == r) lowest = std::min(lowest, s);
    }
    const model::Parameter* target = runners[r]->chunk(lowest)->parameters().back();
    poison = std::make_pair(target->global_layer, target->name);
    poisoning = std::make_unique<PoisoningRunner>(runners[r].get(), lowest);
    raw[r] = poisoning.get();
  }
  FakeTransportHub hub(c.p);
  auto results = RunInProcess(*plan, raw, kSteps, &hub);
  ASSERT_TRUE(results.ok()) << results.status();

  const Reference ref = TrainReference(config, c.m, settings, poison);
  ASSERT_LT(ref.losses.back(), ref.losses.front()) << "the reference did not train at all";
  const int loss_worker = plan->WorkerOf(plan->num_stages - 1);
  const int verdict_worker = plan->WorkerOf(0);
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE((*results)[loss_worker][step].loss.has_value());
    EXPECT_EQ(*(*results)[loss_worker][step].loss, ref.losses[step]) << "step " << step;
    EXPECT_EQ(ref.skipped[step], c.recipe == Recipe::kNonFinite && step == kPoisonStep);
    // The rank of stage 0 reports the verdict, bitwise the reference's norm; the others none.
    for (int r = 0; r < c.p; ++r) {
      const StepResult& got = (*results)[r][step];
      if (r != verdict_worker) {
        EXPECT_FALSE(got.grad_norm.has_value()) << "rank " << r;
        EXPECT_FALSE(got.update_skipped) << "rank " << r;
        continue;
      }
      EXPECT_EQ(got.update_skipped, ref.skipped[step]) << "step " << step;
      EXPECT_EQ(got.grad_clipped, ref.clipped[step]) << "step " << step;
      ASSERT_TRUE(got.grad_norm.has_value());
      if (ref.skipped[step]) {
        EXPECT_FALSE(std::isfinite(*got.grad_norm));
      } else {
        EXPECT_EQ(*got.grad_norm, ref.grad_norms[step]) << "step " << step;
      }
    }
  }
  const int clipped_steps =
      static_cast<int>(std::count(ref.clipped.begin(), ref.clipped.end(), true));
  const int skipped_steps =
      static_cast<int>(std::count(ref.skipped.begin(), ref.skipped.end(), true));
  if (c.recipe == Recipe::kClipped || c.recipe == Recipe::kTied) {
    EXPECT_GT(clipped_steps, 0) << "the threshold clips no step";
    EXPECT_LT(clipped_steps, kSteps) << "the threshold clips every step";
  } else {
    EXPECT_EQ(clipped_steps, 0);
  }
  // Every rank that is not the verdict's origin acted before knowing it: on a clipped or
  // skipped step it rolled its update back, or deferred or dropped it from its partial sum.
  for (int r = 0; r < c.p; ++r) {
    const ModelStageRunner::UpdateCounts& n = runners[r]->update_counts();
    if (r == verdict_worker) {
      EXPECT_EQ(n.final_at_step_end, kSteps);
      continue;
    }
    EXPECT_EQ(n.speculated + n.deferred + n.skipped_early, kSteps) << "rank " << r;
    EXPECT_EQ(n.rolled_back + n.deferred + n.skipped_early, clipped_steps + skipped_steps)
        << "rank " << r;
  }
  if (c.recipe == Recipe::kNonFinite) {
    // Without clipping, a rank whose partial sum misses the poisoned stage updates unclipped
    // and must roll the NaN step back: the rank of the last stage, when it holds neither
    // stage 0 nor the poisoned stage.
    const int last_worker = plan->WorkerOf(plan->num_stages - 1);
    if (last_worker != verdict_worker && last_worker != PoisonRank(c.p)) {
      EXPECT_GE(runners[last_worker]->update_counts().rolled_back, 1);
    }
  }
  // Every weight, stage by stage in model order, bitwise.
  std::vector<std::vector<float>> weights;
  for (int s = 0; s < plan->num_stages; ++s) {
    const int r = plan->WorkerOf(s);
    auto w = Weights(*backends[r], *runners[r]->chunk(s));
    weights.insert(weights.end(), w.begin(), w.end());
  }
  ASSERT_EQ(weights.size(), ref.weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    ASSERT_EQ(weights[i].size(), ref.weights[i].size());
    EXPECT_EQ(
        std::memcmp(weights[i].data(), ref.weights[i].data(), weights[i].size() * sizeof(float)), 0)
        << "parameter " << i << " differs";
  }
  if (c.recipe == Recipe::kTied) {
    // The head's copy of the token embedding is the embedding, bitwise, on every layout.
    const int last_stage = plan->num_stages - 1;
    model::GptChunk* first = runners[plan->WorkerOf(0)]->chunk(0);
    model::GptChunk* last = runners[plan->WorkerOf(last_stage)]->chunk(last_stage);
    ASSERT_NE(first->tied_embedding(), nullptr);
    ASSERT_NE(last->tied_head_copy(), nullptr);
    EXPECT_EQ(*backends[plan->WorkerOf(0)]->ToVector(first->tied_embedding()->value),
              *backends[plan->WorkerOf(last_stage)]->ToVector(last->tied_head_copy()->value));
  }
  for (int r = 0; r < c.p; ++r) {
    for (const StepResult& step : (*results)[r]) {
      EXPECT_EQ(step.peak_activation_bytes, std::llround(sim->peak_memory[r]))
          << "worker " << r << " step " << step.step;
    }
  }
}

std::string RecipeSuffix(Recipe recipe) {
  switch (recipe) {
    case Recipe::kConstant:
      return "";
    case Recipe::kScheduled:
      return "_scheduled";
    case Recipe::kClipped:
      return "_clipped";
    case Recipe::kTied:
      return "_tied";
    case Recipe::kNonFinite:
      return "_nonfinite";
  }
  return "";
}

// Every schedule with every recipe.
std::vector<TrainingCase> AllCases() {
  const std::vector<TrainingCase> schedules = {{"gpipe", 2, 4},
                                               {"1f1b", 2, 4},
                                               {"1f1b", 4, 6},
                                               {"interleaved-1f1b", 2, 4},
                                               {"interleaved-1f1b", 4, 8},
                                               {"zb-h1", 2, 4},
                                               {"zb-h1", 4, 6},
                                               {"zb-h2", 4, 8},
                                               {"zb-v", 2, 4},
                                               {"zb-v", 4, 8},
                                               {"v-half", 4, 8},
                                               {"v-min", 4, 8},
                                               {"v-zb", 4, 8}};
  std::vector<TrainingCase> out;
  for (Recipe recipe :
       {Recipe::kConstant, Recipe::kScheduled, Recipe::kClipped, Recipe::kNonFinite,
        Recipe::kTied}) {
    for (TrainingCase c : schedules) {
      c.recipe = recipe;
      out.push_back(c);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schedules, ExactTrainingTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<TrainingCase>& info) {
                           std::string n =
                               info.param.schedule + "_p" + std::to_string(info.param.p) + "_m" +
                               std::to_string(info.param.m) + RecipeSuffix(info.param.recipe);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace pipetrain::worker
