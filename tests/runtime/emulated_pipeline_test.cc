// Every registered schedule runs on the emulated backend with real memory accounting; the
// measured peak activation bytes of every worker must equal the simulator's prediction exactly
// (both count the same tensors: F's stored activations until B/W release them).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kernels/cpu/cpu_backend.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/in_process_pipeline.h"

namespace pipetrain::worker {
namespace {

struct Case {
  std::string schedule;
  int p;
  int m;
  double freed_by_b;  // share of a stage's activation that B frees
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << " m=" << c.m << " freed_by_b=" << c.freed_by_b;
}

class EmulatedPipelineTest : public ::testing::TestWithParam<Case> {};

TEST_P(EmulatedPipelineTest, MeasuredPeakEqualsSimulatedPeak) {
  const Case& c = GetParam();
  schedule::PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = c.m;
  spec.f = 4e-4;
  spec.b = 4e-4;
  spec.w = 4e-4;
  auto compute = schedule::Generate(c.schedule, spec);
  if (!compute.ok() && compute.status().code() == absl::StatusCode::kInvalidArgument &&
      compute.status().message().find("unknown schedule") != std::string::npos) {
    GTEST_SKIP() << c.schedule << " is not registered in this build";
  }
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto plan = schedule::AddTransfers(*compute);
  ASSERT_TRUE(plan.ok()) << plan.status();
  schedule::CostModel costs = schedule::CostModelFor(spec, plan->ChunksPerWorker());
  for (auto& stage : costs.stages) stage.freed_by_b = stage.activation * c.freed_by_b;
  auto sim = schedule::Simulate(*plan, costs);
  ASSERT_TRUE(sim.ok()) << sim.status();

  constexpr double kBytesPerUnit = 1 << 20;
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<EmulatedStageRunner>> runners;
  std::vector<StageRunner*> raw;
  for (int r = 0; r < c.p; ++r) {
    backends.push_back(std::make_unique<kernels::CpuBackend>());
    runners.push_back(std::make_unique<EmulatedStageRunner>(
        backends.back().get(), plan->num_stages, EmulatedStageConfig{costs, kBytesPerUnit, 256}));
    raw.push_back(runners.back().get());
  }
  FakeTransportHub hub(c.p);
  auto results = RunInProcess(*plan, raw, /*steps=*/2, &hub);
  ASSERT_TRUE(results.ok()) << results.status();
  for (int r = 0; r < c.p; ++r) {
    ASSERT_EQ((*results)[r].size(), 2u);
    for (const StepResult& step : (*results)[r]) {
      const int64_t predicted = std::llround(sim->peak_memory[r] * kBytesPerUnit);
      EXPECT_EQ(step.peak_activation_bytes, predicted)
          << c.schedule << " worker " << r << " step " << step.step;
      EXPECT_EQ(step.timings.size(), plan->worker_actions[r].size());
    }
    EXPECT_EQ(runners[r]->activation_bytes(), 0) << "worker " << r << " leaked activations";
  }
}

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.schedule + "_p" + std::to_string(info.param.p) + "_m" +
                     std::to_string(info.param.m) + (info.param.freed_by_b > 0 ? "_bfrees" : "");
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Schedules, EmulatedPipelineTest,
                         ::testing::Values(Case{"gpipe", 4, 8, 0}, Case{"1f1b", 4, 8, 0},
                                           Case{"1f1b", 2, 5, 0.5},
                                           Case{"interleaved-1f1b", 4, 8, 0},
                                           Case{"zb-h1", 4, 8, 0}, Case{"zb-h1", 3, 7, 0.25},
                                           Case{"zb-h2", 4, 8, 0}, Case{"zb-v", 4, 8, 0},
                                           Case{"v-half", 4, 8, 0}, Case{"v-min", 4, 8, 0},
                                           Case{"v-zb", 4, 8, 0}, Case{"v-half", 3, 9, 0.5}),
                         Name);

}  // namespace
}  // namespace pipetrain::worker
