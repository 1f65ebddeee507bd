// The correctness bar: pipelined training under every schedule computes the same function as
// single-process training. p workers run as threads with real GPT chunks; after several
// optimizer steps their losses and every weight must be BITWISE equal to one process training
// the whole model with the same data (the chunks accumulate weight gradients in microbatch
// order, so the schedule's W order cannot change rounding). The measured peak activation bytes
// of every worker must equal the simulator's prediction made with the model's analytic bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "model/cost_model.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/runtime/in_process_pipeline.h"
#include "worker/runtime/model_stage_runner.h"

namespace pipetrain::worker {
namespace {

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
};

// Single process, whole model, microbatches in order with fused backward.
Reference TrainReference(const model::GptConfig& c, int m) {
  kernels::CpuBackend backend;
  auto chunk = model::GptChunk::Create(&backend, c, model::WholeModel(c));
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  auto data = Data(c);
  Reference ref;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_TRUE((*chunk)->ZeroGrad().ok());
    double loss = 0;
    for (int mb = 0; mb < m; ++mb) {
      MicrobatchData d = *data(step, mb);
      model::ForwardInput in;
      in.tokens = d.tokens;
      in.targets = d.targets;
      in.loss_scale = 1.0f / m;
      auto out = (*chunk)->Forward(mb, std::move(in));
      EXPECT_TRUE(out.ok()) << out.status();
      loss += out->loss / m;
      EXPECT_TRUE((*chunk)->Backward(mb, kernels::Tensor()).ok());
    }
    EXPECT_TRUE((*chunk)->OptimizerStep(Adam(), step + 1).ok());
    ref.losses.push_back(loss);
  }
  ref.weights = Weights(backend, **chunk);
  return ref;
}

struct Case {
  std::string schedule;
  int p;
  int m;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.schedule << " p=" << c.p << " m=" << c.m; }

class ExactTrainingTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExactTrainingTest, PipelinedEqualsSingleProcessBitwise) {
  const Case& c = GetParam();
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
  const model::GptConfig config = SmallModel(plan->num_stages);  // one block per stage

  // Predicted peak activation bytes from the model's analytic stash sizes.
  auto costs = ExactByteCosts(*plan, config);
  ASSERT_TRUE(costs.ok()) << costs.status();
  auto sim = schedule::Simulate(*plan, *costs);
  ASSERT_TRUE(sim.ok()) << sim.status();

  auto workers = MakeModelWorkers(*plan, config, c.m);
  ASSERT_TRUE(workers.ok()) << workers.status();
  std::vector<std::unique_ptr<kernels::CpuBackend>>& backends = workers->backends;
  std::vector<std::unique_ptr<ModelStageRunner>>& runners = workers->runners;
  std::vector<StageRunner*>& raw = workers->raw;
  FakeTransportHub hub(c.p);
  auto results = RunInProcess(*plan, raw, kSteps, &hub);
  ASSERT_TRUE(results.ok()) << results.status();

  const Reference ref = TrainReference(config, c.m);
  ASSERT_LT(ref.losses.back(), ref.losses.front()) << "the reference did not train at all";
  const int loss_worker = plan->WorkerOf(plan->num_stages - 1);
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE((*results)[loss_worker][step].loss.has_value());
    EXPECT_EQ(*(*results)[loss_worker][step].loss, ref.losses[step]) << "step " << step;
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
  for (int r = 0; r < c.p; ++r) {
    for (const StepResult& step : (*results)[r]) {
      EXPECT_EQ(step.peak_activation_bytes, std::llround(sim->peak_memory[r]))
          << "worker " << r << " step " << step.step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, ExactTrainingTest,
                         ::testing::Values(Case{"gpipe", 2, 4}, Case{"1f1b", 2, 4},
                                           Case{"1f1b", 4, 6}, Case{"interleaved-1f1b", 2, 4},
                                           Case{"interleaved-1f1b", 4, 8}, Case{"zb-h1", 2, 4},
                                           Case{"zb-h1", 4, 6}, Case{"zb-h2", 4, 8},
                                           Case{"zb-v", 2, 4}, Case{"zb-v", 4, 8},
                                           Case{"v-half", 4, 8}, Case{"v-min", 4, 8},
                                           Case{"v-zb", 4, 8}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.schedule + "_p" +
                                           std::to_string(info.param.p) + "_m" +
                                           std::to_string(info.param.m);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace pipetrain::worker
