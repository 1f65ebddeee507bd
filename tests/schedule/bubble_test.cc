// The two bubbles (schedule/bubble.h) on hand-computed schedules: the step bubble (1 - work /
// (workers x makespan), what a user loses) and the per-stage one the papers print.
#include "schedule/bubble.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/cost_model.h"
#include "schedule/generator.h"
#include "schedule/plan_json.h"
#include "schedule/render_ascii.h"
#include "schedule/simulator.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

using ::pipetrain::schedule::testing::FromRows;

// Per rank: 1 - busy / step; the mean is the step bubble.
TEST(BubbleTest, RankBubblesSplitTheStepBubble) {
  const std::vector<double> per_rank = RankBubbles({3.0, 6.0}, 8.0);
  ASSERT_EQ(per_rank.size(), 2u);
  EXPECT_DOUBLE_EQ(per_rank[0], 0.625);
  EXPECT_DOUBLE_EQ(per_rank[1], 0.25);
  EXPECT_DOUBLE_EQ((per_rank[0] + per_rank[1]) / 2, StepBubble({3.0, 6.0}, 8.0));
  EXPECT_TRUE(RankBubbles({1.0}, 0.0).empty());
  EXPECT_EQ(RankBubbles({9.0}, 8.0), std::vector<double>{0.0});  // clamped
}

TEST(BubbleTest, FormulasOnPlainNumbers) {
  // Work 3 + 6 on 2 workers over a 9-long step: half the step is idle; the busiest worker (6)
  // idles a third of the longest span (9).
  EXPECT_DOUBLE_EQ(StepBubble({3.0, 6.0}, 9.0), 0.5);
  EXPECT_DOUBLE_EQ(PerStageBubble({3.0, 6.0}, {9.0, 6.0}), 1.0 - 6.0 / 9.0);
  EXPECT_DOUBLE_EQ(StepBubble({}, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(StepBubble({1.0}, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(PerStageBubble({1.0}, {0.0}), 0.0);
}

// Two stages, one microbatch, stage 1 twice as heavy: F0 [0,1] on w0, F1 [1,3] and BW1 [3,7] on
// w1, BW0 [7,9] on w0. Busy 3 and 6; spans 9 and 6; makespan 9.
TEST(BubbleTest, SimulatedStepAndPerStageBubblesDiffer) {
  const Schedule s = FromRows(1, {0, 1}, {"0F0 0B0", "1F0 1B0"});
  CostModel c = UniformCostModel(2, 1, 1, 1, 1, /*comm=*/0.0);
  c.stages[1].f = 2;
  c.stages[1].b = 2;
  c.stages[1].w = 2;
  auto r = Simulate(s, c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->makespan, 9.0);
  EXPECT_DOUBLE_EQ(r->busy[0], 3.0);
  EXPECT_DOUBLE_EQ(r->busy[1], 6.0);
  EXPECT_DOUBLE_EQ(r->span[1], 6.0);
  EXPECT_DOUBLE_EQ(r->bubble_ratio, 1.0 / 3.0);  // the busiest worker: 1 - 6 / 9
  EXPECT_DOUBLE_EQ(r->step_bubble_ratio, 0.5);   // 1 - (3 + 6) / (2 x 9)

  // Both are in the plan JSON and the text summary, each named.
  const nlohmann::json doc = nlohmann::json::parse(PlanToJson(s, *r, c));
  EXPECT_DOUBLE_EQ(doc["predictions"]["bubble_ratio"].get<double>(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(doc["predictions"]["step_bubble_ratio"].get<double>(), 0.5);
  const std::string summary = RenderSummary(s, *r);
  EXPECT_NE(summary.find("step bubble 0.500000 (1 - work / (workers x makespan))"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("bubble ratio 0.333333 (per stage"), std::string::npos) << summary;
}

// ZB-V at p = 4, m = 8, unit costs: every worker is busy from its own first action to its last
// (per-stage bubble 0, as the paper prints), yet the step is longer than a worker's work
// (m x 3 = 24 per worker) because the workers start and end at different times.
TEST(BubbleTest, ZbvPerStageZeroButTheStepIsNot) {
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  auto s = Generate("zb-v", spec);
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->bubble_ratio, 0.0, 1e-12);
  for (int w = 0; w < 4; ++w) EXPECT_DOUBLE_EQ(r->busy[w], 24.0) << w;
  EXPECT_GT(r->makespan, 24.0);
  EXPECT_DOUBLE_EQ(r->step_bubble_ratio, 1.0 - 24.0 / r->makespan);
  EXPECT_GT(r->step_bubble_ratio, 0.05);
}

}  // namespace
}  // namespace pipetrain::schedule
