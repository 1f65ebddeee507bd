// DualPipeV (gen_dualpipev.h) and the overlapped F+B pair it uses (OVERLAP_F, action.h): the
// exact list of a small case in PyTorch's CSV form, the unit-cost laws (peak p + 1/2 units on
// every worker, step 3m + (p-1)/2), the pair count per worker, transfers around a pair, the
// validator's pairing rule, CSV round trips and refusals.
#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/schedule_io.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

using testing::Spec;

TEST(DualPipeVTest, SmallCaseIsTheExpectedOrder) {
  auto s = Generate("dualpipev", Spec(2, 4));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ScheduleToCsv(*s),
            "0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,3B2,"
            "(3F3;0B1)OVERLAP_F_B,3B3,0I2,0W2,0I3,0W3\n"
            "1F0,2F0,1F1,2F1,1F2,2B0,(2F2;1B0)OVERLAP_F_B,(1F3;2B1)OVERLAP_F_B,"
            "(2F3;1B1)OVERLAP_F_B,2B2,1B2,2I3,1I3,2W3,1W3\n");
}

TEST(DualPipeVTest, UnitCostLaws) {
  for (int p = 2; p <= 12; ++p) {
    for (int m : {2 * p, 2 * p + 1, 3 * p, 64}) {
      if (m < 2 * p) continue;
      auto s = Generate("dualpipev", Spec(p, m));
      ASSERT_TRUE(s.ok()) << "p=" << p << " m=" << m << ": " << s.status();
      auto sim = Simulate(*s, CostModelFor(Spec(p, m), 2));
      ASSERT_TRUE(sim.ok()) << sim.status();
      EXPECT_DOUBLE_EQ(sim->makespan, 3.0 * m + (p - 1) / 2.0) << "p=" << p << " m=" << m;
      for (int w = 0; w < p; ++w) {
        EXPECT_DOUBLE_EQ(sim->peak_memory[w], p + 0.5) << "p=" << p << " m=" << m << " w=" << w;
      }
      // Overlapped pairs per worker r: two per steady round (m-2p+r+1 rounds; the last worker's
      // first round has one), plus one per cool-down round (p-1-r).
      for (int r = 0; r < p; ++r) {
        const auto& list = s->worker_actions[r];
        const int pairs = static_cast<int>(std::count_if(list.begin(), list.end(), [](const Action& a) {
          return a.kind == ActionKind::kOverlapF;
        }));
        EXPECT_EQ(pairs, 2 * (m - 2 * p + r + 1) + (p - 1 - r) - (r == p - 1 ? 1 : 0))
            << "p=" << p << " m=" << m << " r=" << r;
      }
    }
  }
}

TEST(DualPipeVTest, SameStepTimeAsZbVAtUnitCosts) {
  for (int p : {4, 8}) {
    const int m = 4 * p;
    auto d = Generate("dualpipev", Spec(p, m));
    auto z = Generate("zb-v", Spec(p, m));
    ASSERT_TRUE(d.ok() && z.ok());
    EXPECT_DOUBLE_EQ(Simulate(*d, CostModelFor(Spec(p, m), 2))->makespan,
                     Simulate(*z, CostModelFor(Spec(p, m), 2))->makespan)
        << p;
  }
}

TEST(DualPipeVTest, TransfersSurroundEachPair) {
  auto s = Generate("dualpipev", Spec(4, 8, 1, 2, 1, 0.2));
  ASSERT_TRUE(s.ok()) << s.status();
  auto t = AddTransfers(*s);
  ASSERT_TRUE(t.ok()) << t.status();
  int pairs = 0;
  for (const auto& list : t->worker_actions) {
    for (size_t k = 0; k < list.size(); ++k) {
      if (list[k].kind != ActionKind::kOverlapF) continue;
      ++pairs;
      ASSERT_LT(k + 1, list.size());
      EXPECT_TRUE(list[k + 1].kind == ActionKind::kBW) << ToString(list[k + 1]);
    }
  }
  EXPECT_GT(pairs, 0);
  // Explicit transfers hold the pair's outputs until the pair ends: never faster than the
  // compute-only timing, which lets the F's output go at the F's end.
  auto with = Simulate(*t, CostModelFor(Spec(4, 8, 1, 2, 1, 0.2), 2));
  auto without = Simulate(*s, CostModelFor(Spec(4, 8, 1, 2, 1, 0.2), 2));
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_GE(with->makespan, without->makespan - 1e-9);
  auto csv = ScheduleFromCsv(ScheduleToCsv(*t));
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->worker_actions, t->worker_actions);
}

TEST(DualPipeVTest, ValidatorRejectsUnpairedOverlap) {
  // 0OVERLAP_F0 followed by a W, and one at the end of a list.
  Schedule s = testing::FromRows(
      1, {0, 1}, {"0OVERLAP_F0 0F0", "1F0 1B0 1W0"});
  EXPECT_NE(ValidateSchedule(s).message().find("unpaired OVERLAP_F"), std::string::npos)
      << ValidateSchedule(s);
  s = testing::FromRows(1, {0, 1}, {"0I0 0W0 0OVERLAP_F0", "1F0 1B0 1W0"});
  EXPECT_NE(ValidateSchedule(s).message().find("unpaired OVERLAP_F"), std::string::npos);
  // Paired with the backward right after it: valid (a pair on one worker's two stages).
  s = testing::FromRows(2, {0, 0}, {"0F0 1F0 1B0 0OVERLAP_F1 0B0 1F1 1B1 0B1"});
  EXPECT_TRUE(ValidateSchedule(s).ok()) << ValidateSchedule(s);
  // An OVERLAP_F counts as the stage's F: a second F for the same slot is a duplicate.
  s = testing::FromRows(1, {0}, {"0OVERLAP_F0 0B0 0F0"});
  EXPECT_FALSE(ValidateSchedule(s).ok());
}

TEST(DualPipeVTest, CsvCellErrors) {
  EXPECT_TRUE(ScheduleFromCsv("(0F0;1B0)OVERLAP_F_B\n").ok());
  for (const char* bad : {"(0F0;1B0)OVERLAP\n", "(0F0)OVERLAP_F_B\n", "(0W0;1B0)OVERLAP_F_B\n",
                          "(0F0;1W0)OVERLAP_F_B\n", "(0F0;1B0;2B0)OVERLAP_F_B\n"}) {
    auto s = ScheduleFromCsv(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("OVERLAP_F_B"), std::string::npos) << s.status();
  }
}

TEST(DualPipeVTest, Refusals) {
  auto s = Generate("dualpipev", Spec(4, 7));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("num_microbatches >= 2 x num_workers = 8"),
            std::string::npos)
      << s.status();
  EXPECT_NE(Generate("dualpipev", Spec(1, 8)).status().message().find("num_workers"),
            std::string::npos);
  PipelineSpec three = Spec(4, 8);
  three.chunks_per_worker = 3;
  EXPECT_NE(Generate("dualpipev", three).status().message().find("chunks_per_worker"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetrain::schedule
