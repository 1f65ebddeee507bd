// The profiling step times every held stage and leaves no trace: a V-Half pipeline whose workers
// were profiled first trains to bitwise the same losses and weights, and reports the same peak
// activation bytes, as one that was not.
#include "worker/runtime/stage_profiler.h"

#include <cstring>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/runtime/in_process_pipeline.h"
#include "worker/transport/fake_transport.h"

namespace pipetrain::worker {
namespace {

using testing::MakeModelWorkers;
using testing::SmallModel;
using testing::Weights;

constexpr int kWorkers = 2, kMicrobatches = 4, kProfiledSteps = 2;

struct TrainedRun {
  std::vector<std::vector<StepResult>> results;
  std::vector<std::vector<float>> weights;
};

TrainedRun Train(bool profile_first) {
  schedule::PipelineSpec spec;
  spec.num_workers = kWorkers;
  spec.num_microbatches = kMicrobatches;
  schedule::Schedule plan =
      schedule::AddTransfers(schedule::Generate("v-half", spec).value()).value();
  const model::GptConfig config = SmallModel(plan.num_stages);
  auto workers = MakeModelWorkers(plan, config, kMicrobatches);
  EXPECT_TRUE(workers.ok()) << workers.status();
  if (profile_first) {
    for (int w = 0; w < kWorkers; ++w) {
      std::vector<int> stages;
      for (int s = 0; s < plan.num_stages; ++s) {
        if (plan.WorkerOf(s) == w) stages.push_back(s);
      }
      ProfileShape shape;
      shape.num_stages = plan.num_stages;
      shape.rows = int64_t{testing::kMicrobatchSize} * config.seq_len;
      shape.hidden = config.hidden;
      auto profile = ProfileStages(*workers->runners[w], stages, shape);
      if (!profile.ok() || profile->size() != stages.size()) {
        ADD_FAILURE() << "profile of worker " << w << ": " << profile.status();
        return {};
      }
      for (size_t i = 0; i < stages.size(); ++i) {
        const StageProfile& p = (*profile)[i];
        EXPECT_EQ(p.stage, stages[i]);
        EXPECT_GT(p.forward_s, 0);
        EXPECT_GT(p.backward_input_s, 0);
        EXPECT_GT(p.backward_weight_s, 0);
        EXPECT_LT(p.forward_s, 1.0);  // a tiny model: far below a second per action
      }
      // W freed everything F stored; the peak starts again from what is held (nothing).
      EXPECT_EQ(workers->runners[w]->activation_bytes(), 0);
      EXPECT_EQ(workers->runners[w]->peak_activation_bytes(), 0);
    }
  }
  FakeTransportHub hub(kWorkers);
  TrainedRun run;
  auto results = RunInProcess(plan, workers->raw, kProfiledSteps, &hub);
  EXPECT_TRUE(results.ok()) << results.status();
  run.results = *results;
  for (int s = 0; s < plan.num_stages; ++s) {
    const int r = plan.WorkerOf(s);
    auto w = Weights(*workers->backends[r], *workers->runners[r]->chunk(s));
    run.weights.insert(run.weights.end(), w.begin(), w.end());
  }
  return run;
}

TEST(StageProfilerTest, ProfilingLeavesTrainingBitwiseUnchanged) {
  const TrainedRun plain = Train(false);
  const TrainedRun profiled = Train(true);
  ASSERT_EQ(plain.results.size(), profiled.results.size());
  for (int w = 0; w < kWorkers; ++w) {
    for (int step = 0; step < kProfiledSteps; ++step) {
      const StepResult& a = plain.results[w][step];
      const StepResult& b = profiled.results[w][step];
      EXPECT_EQ(a.loss.has_value(), b.loss.has_value());
      if (a.loss.has_value()) {
        EXPECT_EQ(*a.loss, *b.loss) << "step " << step;
      }
      EXPECT_EQ(a.peak_activation_bytes, b.peak_activation_bytes) << "worker " << w;
    }
  }
  ASSERT_EQ(plain.weights.size(), profiled.weights.size());
  for (size_t i = 0; i < plain.weights.size(); ++i) {
    ASSERT_EQ(plain.weights[i].size(), profiled.weights[i].size());
    EXPECT_EQ(std::memcmp(plain.weights[i].data(), profiled.weights[i].data(),
                          plain.weights[i].size() * sizeof(float)),
              0)
        << "parameter " << i;
  }
}

// Warm median, not the fastest: the first repeat (cold) is dropped; a stall cannot move it past
// 1.25x the fastest.
TEST(StageProfilerTest, TypicalSecondsIsTheWarmMedianCapped) {
  EXPECT_DOUBLE_EQ(TypicalSeconds({2.0, 1.0, 1.2, 1.1, 1.3}), 1.15);  // median of 1.0 1.1 1.2 1.3
  EXPECT_DOUBLE_EQ(TypicalSeconds({2.0, 1.0, 1.1, 1.2}), 1.1);        // odd count: the middle
  EXPECT_DOUBLE_EQ(TypicalSeconds({1.6, 1.0, 45.0, 44.0, 1.0}), 1.25);  // stalls: capped
  EXPECT_DOUBLE_EQ(TypicalSeconds({1.0, 3.0}), 1.25);  // two repeats: both kept, capped
  EXPECT_DOUBLE_EQ(TypicalSeconds({0.7}), 0.7);
  EXPECT_DOUBLE_EQ(TypicalSeconds({}), 0.0);
}

TEST(StageProfilerTest, RejectsZeroRepeats) {
  schedule::PipelineSpec spec;
  spec.num_workers = 1;
  spec.num_microbatches = 1;
  schedule::Schedule plan = schedule::Generate("1f1b", spec).value();
  auto workers = MakeModelWorkers(plan, SmallModel(1), 1).value();
  ProfileShape shape;
  shape.repeats = 0;
  EXPECT_EQ(ProfileStages(*workers.runners[0], {0}, shape).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::worker
