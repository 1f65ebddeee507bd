// The executor's end-of-step protocol (optimizer post-validation, worker/runtime/executor.h),
// with emulated compute: p workers (threads, in-memory transport) run real schedules whose
// runners contribute planted squared-gradient terms per stage. For every placement of stages
// (loop, interleaved, V-shape) the rank of stage 0 must end each step with the complete sum,
// added from the last stage down to stage 0 exactly as one process adds it; every other rank
// must end it with its partial sum (the stages from the last down to its lowest) and then settle
// with the complete sum, bitwise, before its next step; a NaN on ANY rank must make the complete
// sum, and so the reported verdict, non-finite. Runners without gradients exchange nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/model/gradient_clipping.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/in_process_pipeline.h"
#include "worker/runtime/model_stage_runner.h"

namespace pipetrain::worker {
namespace {

// The planted term of (stage, step): distinct values whose sums depend on the order of
// addition in the last bits; NaN where the test plants a non-finite gradient.
double Term(int stage, int step, const std::set<std::pair<int, int>>& bad) {
  if (bad.count({stage, step}) > 0) return std::numeric_limits<double>::quiet_NaN();
  return 1.0 / (3.0 + stage) + 1e-3 * step + 0.1 * std::sqrt(2.0 + stage);
}

// Emulated compute that contributes Term(stage, step) per stage and records what the executor
// tells it at the end of each step and when it settles.
class TermRunner final : public testing::ForwardingStageRunner {
 public:
  TermRunner(std::unique_ptr<EmulatedStageRunner> inner, std::set<std::pair<int, int>> bad)
      : ForwardingStageRunner(inner.get()), owned_(std::move(inner)), bad_(std::move(bad)) {}
  absl::Status BeginStep(int step) override {
    step_ = step;
    return ForwardingStageRunner::BeginStep(step);
  }
  absl::StatusOr<bool> SumGradientSquares() override { return true; }
  absl::StatusOr<double> AddGradientSquares(int stage, double running) override {
    return running + Term(stage, step_, bad_);
  }
  absl::StatusOr<StepEnd> EndStep(std::optional<GradientNormPart> norm) override {
    if (!norm.has_value()) return absl::InternalError("no norm");
    ends_[step_] = *norm;
    PT_ASSIGN_OR_RETURN(StepEnd end, ForwardingStageRunner::EndStep(norm));
    if (norm->complete) end.verdict = model::DecideClip(norm->sum_squares, 0.0);
    return end;
  }
  absl::Status SettleUpdate(double sum_squares) override {
    settled_[step_] = sum_squares;
    return absl::OkStatus();
  }
  const std::map<int, GradientNormPart>& ends() const { return ends_; }
  const std::map<int, double>& settled() const { return settled_; }

 private:
  std::unique_ptr<EmulatedStageRunner> owned_;
  std::set<std::pair<int, int>> bad_;
  int step_ = -1;
  std::map<int, GradientNormPart> ends_;
  std::map<int, double> settled_;
};

bool SameDouble(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

struct PostCase {
  std::string schedule;
  int p;
  int m;
};
void PrintTo(const PostCase& c, std::ostream* os) { *os << c.schedule << " p=" << c.p; }

class PostValidationTest : public ::testing::TestWithParam<PostCase> {
 protected:
  void SetUp() override {
    schedule::PipelineSpec spec;
    spec.num_workers = GetParam().p;
    spec.num_microbatches = GetParam().m;
    auto compute = schedule::Generate(GetParam().schedule, spec);
    ASSERT_TRUE(compute.ok()) << compute.status();
    auto plan = schedule::AddTransfers(*compute);
    ASSERT_TRUE(plan.ok()) << plan.status();
    plan_ = *std::move(plan);
  }

  // Runs kSteps steps with NaN terms at the (stage, step) pairs in `bad`.
  void Run(const std::set<std::pair<int, int>>& bad) {
    schedule::CostModel costs;
    costs.stages.assign(plan_.num_stages, schedule::StageCost{1e-6, 1e-6, 1e-6, -1, 1.0, 0.0});
    backends_.clear();
    runners_.clear();
    std::vector<StageRunner*> raw;
    for (int r = 0; r < plan_.num_workers; ++r) {
      backends_.push_back(std::make_unique<kernels::CpuBackend>());
      runners_.push_back(std::make_unique<TermRunner>(
          std::make_unique<EmulatedStageRunner>(backends_.back().get(), plan_.num_stages,
                                                EmulatedStageConfig{costs, 64, 16}),
          bad));
      raw.push_back(runners_.back().get());
    }
    FakeTransportHub hub(plan_.num_workers);
    auto results = RunInProcess(plan_, raw, kSteps, &hub);
    ASSERT_TRUE(results.ok()) << results.status();
    results_ = *std::move(results);
  }

  void Expect(const std::set<std::pair<int, int>>& bad) {
    const int last = plan_.num_stages - 1;
    for (int step = 0; step < kSteps; ++step) {
      // What one process computes: the terms from the last stage down to stage 0.
      std::vector<double> from(plan_.num_stages + 1, 0.0);  // from[s]: stages s..last
      for (int s = last; s >= 0; --s) from[s] = from[s + 1] + Term(s, step, bad);
      const double total = from[0];
      for (int r = 0; r < plan_.num_workers; ++r) {
        int lowest = last;
        for (int s = 0; s <= last; ++s) {
          if (plan_.WorkerOf(s) == r) lowest = std::min(lowest, s);
        }
        const GradientNormPart& end = runners_[r]->ends().at(step);
        EXPECT_EQ(end.complete, lowest == 0) << "rank " << r << " step " << step;
        EXPECT_TRUE(SameDouble(end.sum_squares, from[lowest]))
            << "rank " << r << " step " << step << ": " << end.sum_squares << " vs "
            << from[lowest];
        const StepResult& result = results_[r][step];
        if (lowest == 0) {
          EXPECT_EQ(runners_[r]->settled().count(step), 0u) << "rank " << r;
          ASSERT_TRUE(result.grad_norm.has_value());
          EXPECT_TRUE(SameDouble(*result.grad_norm, std::sqrt(total)));
          EXPECT_EQ(result.update_skipped, !std::isfinite(total)) << "step " << step;
        } else {
          ASSERT_EQ(runners_[r]->settled().count(step), 1u) << "rank " << r << " step " << step;
          EXPECT_TRUE(SameDouble(runners_[r]->settled().at(step), total))
              << "rank " << r << " step " << step;
          EXPECT_FALSE(result.grad_norm.has_value());
          EXPECT_FALSE(result.update_skipped);
        }
      }
    }
  }

  static constexpr int kSteps = 3;
  schedule::Schedule plan_;
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends_;
  std::vector<std::unique_ptr<TermRunner>> runners_;
  std::vector<std::vector<StepResult>> results_;
};

TEST_P(PostValidationTest, EveryRankGetsTheSingleProcessSumAndANanAnywhereSkips) {
  // Nothing bad.
  Run({});
  Expect({});
  // A NaN in each stage alone at step 1 (first, middle, last stages of the chain alike).
  for (int s = 0; s < plan_.num_stages; ++s) {
    Run({{s, 1}});
    Expect({{s, 1}});
  }
  // Two stages at different steps, and both at once.
  const std::set<std::pair<int, int>> bad = {{0, 0}, {0, 2}, {plan_.num_stages - 1, 2}};
  Run(bad);
  Expect(bad);
}

INSTANTIATE_TEST_SUITE_P(Schedules, PostValidationTest,
                         ::testing::Values(PostCase{"1f1b", 1, 2}, PostCase{"1f1b", 2, 4},
                                           PostCase{"1f1b", 4, 4}, PostCase{"gpipe", 3, 3},
                                           PostCase{"interleaved-1f1b", 2, 4},
                                           PostCase{"interleaved-1f1b", 4, 8},
                                           PostCase{"zb-v", 2, 4}, PostCase{"v-half", 4, 8},
                                           PostCase{"v-min", 4, 8}),
                         [](const ::testing::TestParamInfo<PostCase>& info) {
                           std::string n =
                               info.param.schedule + "_p" + std::to_string(info.param.p);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// A real runner that does not hold stage 0, driven by hand through the three ways it can end a
// step from a partial sum, and settled: a speculative update kept or rolled back and redone
// clipped (bitwise what clipping with the verdict from the start gives), a deferred one, and a
// verdict that contradicts the partial sum. No checkpoint while an update is open.
class OpenUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    schedule::PipelineSpec spec;
    spec.num_workers = 2;
    spec.num_microbatches = 2;
    auto plan = schedule::AddTransfers(*schedule::Generate("1f1b", spec));
    ASSERT_TRUE(plan.ok()) << plan.status();
    plan_ = *std::move(plan);
  }
  // Rank 1's runner (stage 1 of 2) with clip_grad_norm `clip`, its gradients set to fixed
  // pseudo-random values; returns the partial sum of squares of its stage.
  double Make(double clip) {
    model::OptimizerSettings settings = testing::Constant();
    settings.clip_grad_norm = clip;
    // The runners hold tensors of their backends: free them first.
    workers_.raw.clear();
    workers_.runners.clear();
    auto workers = testing::MakeModelWorkers(plan_, testing::SmallModel(2), 2, 0, settings);
    EXPECT_TRUE(workers.ok()) << workers.status();
    workers_ = *std::move(workers);
    runner_ = workers_.runners[1].get();
    EXPECT_TRUE(runner_->BeginStep(0).ok());
    for (model::Parameter* p : runner_->chunk(1)->parameters()) {
      EXPECT_TRUE(
          workers_.backends[1]
              ->Upload(model::NormalValues(5, p->global_layer, p->name, p->grad.numel(), 0.5f),
                       &p->grad)
              .ok());
    }
    EXPECT_TRUE(*runner_->SumGradientSquares());
    return *runner_->AddGradientSquares(1, 0.0);
  }
  std::vector<std::vector<float>> Values() {
    return testing::Weights(*workers_.backends[1], *runner_->chunk(1));
  }
  schedule::Schedule plan_;
  testing::ModelWorkers workers_;
  ModelStageRunner* runner_ = nullptr;
};

TEST_F(OpenUpdateTest, RollbackRedoesTheStepClippedBitwise) {
  // The verdict clips (total = 16 x partial: norm 4 x the partial's; threshold 2 x).
  const double partial = Make(0.0);
  const double clip = 2 * std::sqrt(partial);
  Make(clip);
  const std::vector<std::vector<float>> before = Values();
  auto end = runner_->EndStep(GradientNormPart{partial, false});
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->verdict.has_value());
  EXPECT_EQ(runner_->update_counts().speculated, 1);
  EXPECT_NE(Values(), before);  // updated, unclipped
  const absl::Status save = runner_->SaveCheckpoint(::testing::TempDir() + "/open", 1);
  EXPECT_EQ(save.code(), absl::StatusCode::kFailedPrecondition) << save;
  ASSERT_TRUE(runner_->SettleUpdate(16 * partial).ok());
  EXPECT_EQ(runner_->update_counts().rolled_back, 1);
  const std::vector<std::vector<float>> settled = Values();
  // What the step is with the verdict known: the same gradients scaled, then AdamW step 1.
  Make(clip);
  const model::ClipVerdict verdict = model::DecideClip(16 * partial, clip);
  ASSERT_TRUE(verdict.clipped);
  ASSERT_TRUE(runner_->chunk(1)->ScaleGradients(verdict.scale).ok());
  ASSERT_TRUE(runner_->chunk(1)->OptimizerStep(testing::Constant(), 1).ok());
  EXPECT_EQ(settled, Values());
}

TEST_F(OpenUpdateTest, AVerdictThatNeedsNothingKeepsTheSpeculativeUpdate) {
  const double partial = Make(0.0);
  Make(100 * std::sqrt(partial));
  ASSERT_TRUE(runner_->EndStep(GradientNormPart{partial, false}).ok());
  const std::vector<std::vector<float>> updated = Values();
  ASSERT_TRUE(runner_->SettleUpdate(4 * partial).ok());  // norm 2 x: under the threshold
  EXPECT_EQ(runner_->update_counts().rolled_back, 0);
  EXPECT_EQ(Values(), updated);
  EXPECT_TRUE(runner_->SaveCheckpoint(::testing::TempDir() + "/settled", 1).ok());
}

TEST_F(OpenUpdateTest, ACertainClipIsDeferredAndAContradictionIsAnError) {
  const double partial = Make(0.0);
  Make(std::sqrt(partial) / 2);  // the partial sum alone is over the threshold
  const std::vector<std::vector<float>> before = Values();
  ASSERT_TRUE(runner_->EndStep(GradientNormPart{partial, false}).ok());
  EXPECT_EQ(runner_->update_counts().deferred, 1);
  EXPECT_EQ(Values(), before);  // nothing yet, and no copy
  ASSERT_TRUE(runner_->SettleUpdate(partial * 1.5).ok());
  EXPECT_NE(Values(), before);
  // A verdict under the threshold cannot follow a partial sum over it.
  Make(std::sqrt(partial) / 2);
  ASSERT_TRUE(runner_->EndStep(GradientNormPart{partial, false}).ok());
  const absl::Status bad = runner_->SettleUpdate(0.0);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInternal) << bad;
  EXPECT_NE(bad.message().find("contradicts"), std::string::npos) << bad;
}

// Emulated compute keeps no gradients: no norm, nothing exchanged, nothing skipped.
TEST(PostValidation, EmulatedRunnersExchangeNothing) {
  schedule::PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 2;
  auto plan = schedule::AddTransfers(*schedule::Generate("1f1b", spec));
  ASSERT_TRUE(plan.ok()) << plan.status();
  schedule::CostModel costs;
  costs.stages.assign(2, schedule::StageCost{1e-6, 1e-6, 1e-6, -1, 1.0, 0.0});
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<EmulatedStageRunner>> runners;
  std::vector<StageRunner*> raw;
  for (int r = 0; r < 2; ++r) {
    backends.push_back(std::make_unique<kernels::CpuBackend>());
    runners.push_back(std::make_unique<EmulatedStageRunner>(backends.back().get(), 2,
                                                            EmulatedStageConfig{costs, 64, 16}));
    raw.push_back(runners.back().get());
  }
  FakeTransportHub hub(2);
  auto results = RunInProcess(*plan, raw, 2, &hub);
  ASSERT_TRUE(results.ok()) << results.status();
  for (int r = 0; r < 2; ++r) {
    for (const StepResult& step : (*results)[r]) {
      EXPECT_FALSE(step.update_skipped);
      EXPECT_FALSE(step.grad_norm.has_value());
      // Two microbatches of 16 floats each way, and no step-status message.
      EXPECT_EQ(step.sent_bytes, 2 * 16 * 4) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace pipetrain::worker
