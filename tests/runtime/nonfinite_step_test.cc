// Non-finite gradients: the executor's end-of-step agreement. p workers (threads, in-memory
// transport) run real schedules whose runners report their own gradients as finite or not; a
// non-finite report on ANY rank must make EVERY rank skip that step's update, and only that
// step's, for every placement of stages (loop, interleaved, V-shape) and every rank that can
// see the NaN. Runners without gradients (emulated) take no part and exchange nothing.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "kernels/cpu/cpu_backend.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/in_process_pipeline.h"

namespace pipetrain::worker {
namespace {

// Emulated compute that reports its gradients non-finite at the chosen steps and records
// whether each step's update was applied.
class ReportingRunner final : public testing::ForwardingStageRunner {
 public:
  ReportingRunner(std::unique_ptr<EmulatedStageRunner> inner, std::set<int> bad_steps)
      : ForwardingStageRunner(inner.get()), owned_(std::move(inner)), bad_steps_(bad_steps) {}
  absl::Status BeginStep(int step) override {
    step_ = step;
    return ForwardingStageRunner::BeginStep(step);
  }
  absl::StatusOr<std::optional<bool>> GradientsFinite() override {
    return std::optional<bool>(bad_steps_.count(step_) == 0);
  }
  absl::StatusOr<std::optional<double>> EndStep(bool apply_update) override {
    applied_[step_] = apply_update;
    return ForwardingStageRunner::EndStep(apply_update);
  }
  const std::map<int, bool>& applied() const { return applied_; }

 private:
  std::unique_ptr<EmulatedStageRunner> owned_;
  std::set<int> bad_steps_;
  int step_ = -1;
  std::map<int, bool> applied_;
};

struct Case {
  std::string schedule;
  int p;
  int m;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.schedule << " p=" << c.p; }

class NonFiniteAgreementTest : public ::testing::TestWithParam<Case> {
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

  // Runs kSteps steps with bad_steps[r] the steps rank r reports non-finite gradients at.
  void Run(const std::vector<std::set<int>>& bad_steps) {
    schedule::CostModel costs;
    costs.stages.assign(plan_.num_stages, schedule::StageCost{1e-6, 1e-6, 1e-6, -1, 1.0, 0.0});
    backends_.clear();
    runners_.clear();
    std::vector<StageRunner*> raw;
    for (int r = 0; r < plan_.num_workers; ++r) {
      backends_.push_back(std::make_unique<kernels::CpuBackend>());
      runners_.push_back(std::make_unique<ReportingRunner>(
          std::make_unique<EmulatedStageRunner>(backends_.back().get(), plan_.num_stages,
                                                EmulatedStageConfig{costs, 64, 16}),
          bad_steps[r]));
      raw.push_back(runners_.back().get());
    }
    FakeTransportHub hub(plan_.num_workers);
    auto results = RunInProcess(plan_, raw, kSteps, &hub);
    ASSERT_TRUE(results.ok()) << results.status();
    results_ = *std::move(results);
  }

  // Every rank skipped exactly the steps some rank reported, and said whose they were.
  void ExpectAgreement(const std::vector<std::set<int>>& bad_steps) {
    std::set<int> any;
    for (const auto& s : bad_steps) any.insert(s.begin(), s.end());
    for (int r = 0; r < plan_.num_workers; ++r) {
      ASSERT_EQ(results_[r].size(), static_cast<size_t>(kSteps));
      for (int step = 0; step < kSteps; ++step) {
        const bool skip = any.count(step) > 0;
        EXPECT_EQ(results_[r][step].update_skipped, skip) << "rank " << r << " step " << step;
        EXPECT_EQ(results_[r][step].gradients_finite, bad_steps[r].count(step) == 0)
            << "rank " << r << " step " << step;
        EXPECT_EQ(runners_[r]->applied().at(step), !skip) << "rank " << r << " step " << step;
      }
    }
  }

  static constexpr int kSteps = 3;
  schedule::Schedule plan_;
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends_;
  std::vector<std::unique_ptr<ReportingRunner>> runners_;
  std::vector<std::vector<StepResult>> results_;
};

TEST_P(NonFiniteAgreementTest, AnyRanksNonFiniteGradientsSkipTheUpdateOnEveryRank) {
  const int p = GetParam().p;
  // Nothing bad: every update applied.
  Run(std::vector<std::set<int>>(p));
  ExpectAgreement(std::vector<std::set<int>>(p));
  // Each rank alone at step 1 (first, middle, last stages of the chain see it alike).
  for (int bad = 0; bad < p; ++bad) {
    std::vector<std::set<int>> bad_steps(p);
    bad_steps[bad] = {1};
    Run(bad_steps);
    ExpectAgreement(bad_steps);
  }
  // Two ranks at different steps, and both at once.
  std::vector<std::set<int>> bad_steps(p);
  bad_steps[0] = {0, 2};
  bad_steps[p - 1] = {2};
  Run(bad_steps);
  ExpectAgreement(bad_steps);
}

INSTANTIATE_TEST_SUITE_P(Schedules, NonFiniteAgreementTest,
                         ::testing::Values(Case{"1f1b", 1, 2}, Case{"1f1b", 2, 4},
                                           Case{"1f1b", 4, 4}, Case{"gpipe", 3, 3},
                                           Case{"interleaved-1f1b", 2, 4},
                                           Case{"interleaved-1f1b", 4, 8}, Case{"zb-v", 2, 4},
                                           Case{"v-half", 4, 8}, Case{"v-min", 4, 8}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n =
                               info.param.schedule + "_p" + std::to_string(info.param.p);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// Emulated compute keeps no gradients: no agreement, nothing exchanged, nothing skipped.
TEST(NonFiniteAgreement, EmulatedRunnersExchangeNothing) {
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
      // Two microbatches of 16 floats each way, and no step-status message.
      EXPECT_EQ(step.sent_bytes, 2 * 16 * 4) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace pipetrain::worker
