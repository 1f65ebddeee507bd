// The simulator's host-link terms: per-direction copy engines that queue, duplex or not, copy
// time from bytes and bandwidth, and the release of an offloaded stash at a compute boundary.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "schedule/cost_model.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

Schedule OneWorker(int m, const std::string& row) {
  Schedule s = MakeEmptySchedule("t", 1, m, {0});
  for (absl::string_view tok : absl::StrSplit(row, ' ', absl::SkipEmpty())) {
    auto a = ParseAction(tok);
    EXPECT_TRUE(a.ok()) << tok;
    s.worker_actions[0].push_back(*a);
  }
  return s;
}

const TimedAction& Find(const SimResult& r, const std::string& action) {
  for (const TimedAction& t : r.timeline) {
    if (ToString(t.action) == action) return t;
  }
  ADD_FAILURE() << action;
  return r.timeline[0];
}

// f = b = w = 1 per stage (BW = 2), activation 1 unit; copies from bytes: 4 bytes per unit,
// 8 bytes/s D2H (0.5 s per copy), 4 bytes/s H2D (1 s per copy).
CostModel Link(bool duplex) {
  CostModel c = UniformCostModel(1, 1, 1, 1, 1);
  c.bytes_per_unit = 4;
  c.d2h_bytes_per_s = 8;
  c.h2d_bytes_per_s = 4;
  c.duplex = duplex;
  return c;
}

TEST(CopyEngineTest, CopyTimeFromBytesAndBandwidth) {
  CostModel c = Link(true);
  EXPECT_DOUBLE_EQ(c.OffloadBytes(0), 4.0);
  EXPECT_DOUBLE_EQ(c.OffloadTime(0), 0.5);
  EXPECT_DOUBLE_EQ(c.ReloadTime(0), 1.0);
  c.stages[0].offload_bytes = 16;  // explicit bytes win over activation * bytes_per_unit
  c.offload = 0.25;                // fixed latency adds
  EXPECT_DOUBLE_EQ(c.OffloadTime(0), 2.25);
  EXPECT_DOUBLE_EQ(c.ReloadTime(0), 4.0);
}

TEST(CopyEngineTest, OffloadsQueueOnTheD2HEngine) {
  // F0 [0,1], F1 [1,2], F2 [2,3]; OFFLOADs issued at 1 and 2 and 3 with 1.5 s copies:
  // [1,2.5], [2.5,4], [4,5.5] - one at a time, in issue order.
  CostModel c = Link(true);
  c.d2h_bytes_per_s = 4.0 / 1.5;
  auto r = Simulate(OneWorker(3, "0F0 0OFFLOAD0 0F1 0OFFLOAD1 0F2 0OFFLOAD2 0RELOAD2 0B2 0RELOAD1 "
                                 "0B1 0RELOAD0 0B0"),
                    c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(Find(*r, "0OFFLOAD0").start, 1.0);
  EXPECT_DOUBLE_EQ(Find(*r, "0OFFLOAD1").start, 2.5);
  EXPECT_DOUBLE_EQ(Find(*r, "0OFFLOAD2").start, 4.0);
  EXPECT_DOUBLE_EQ(Find(*r, "0OFFLOAD2").end, 5.5);
  // RELOAD2 waits for its own offload's copy: [5.5, 6.5]; BW2 [6.5, 8.5].
  EXPECT_DOUBLE_EQ(Find(*r, "0RELOAD2").start, 5.5);
  EXPECT_DOUBLE_EQ(Find(*r, "0B2").start, 6.5);
}

TEST(CopyEngineTest, DuplexRunsBothDirectionsAtOnceSharedSerialises) {
  // OFFLOAD1 [2, 2.5] on D2H; RELOAD0 issued at 2 (OFFLOAD0's copy [1,1.5] is done).
  const std::string row = "0F0 0OFFLOAD0 0F1 0OFFLOAD1 0RELOAD0 0B0 0RELOAD1 0B1";
  CostModel slow = Link(true);
  slow.d2h_bytes_per_s = 2;  // 2 s per offload: OFFLOAD0 [1,3], OFFLOAD1 [3,5]
  auto duplex = Simulate(OneWorker(2, row), slow);
  slow.duplex = false;
  auto shared = Simulate(OneWorker(2, row), slow);
  ASSERT_TRUE(duplex.ok() && shared.ok());
  // Duplex: RELOAD0 needs only OFFLOAD0's copy: [3,4] beside OFFLOAD1 [3,5].
  EXPECT_DOUBLE_EQ(Find(*duplex, "0RELOAD0").start, 3.0);
  EXPECT_DOUBLE_EQ(Find(*duplex, "0B0").start, 4.0);
  // One engine: RELOAD0 queues behind OFFLOAD1: [5,6].
  EXPECT_DOUBLE_EQ(Find(*shared, "0RELOAD0").start, 5.0);
  EXPECT_DOUBLE_EQ(Find(*shared, "0B0").start, 6.0);
}

TEST(CopyEngineTest, DeviceCopyIsReleasedAtTheNextComputeEndWhichWaitsForIt) {
  // F0 [0,1] +1; OFFLOAD0 copy [1,1.5]; F1 [1,2] +1 -> 2 (copy still running at F1's start);
  // released at F1's end (2) -> 1; F2 [2,3] +1 -> 2.
  CostModel c = Link(true);
  auto r = Simulate(OneWorker(3, "0F0 0OFFLOAD0 0F1 0F2 0B2 0B1 0RELOAD0 0B0"), c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->peak_memory[0], 2.0);
  const auto& curve = r->memory_curve[0];
  auto at = [&](double t) {
    double units = 0;
    for (const MemoryPoint& p : curve) {
      if (p.time <= t) units = p.units;
    }
    return units;
  };
  EXPECT_DOUBLE_EQ(at(1.75), 2.0);  // F0's device copy still held during F1
  EXPECT_DOUBLE_EQ(at(2.5), 2.0);   // released at 2, F2 allocated at 2
  // A copy longer than F1 (3 s: [1,4]): the worker waits for it at F1's end (2) until 4,
  // releases, and F2 starts at 4; memory is the same function of the order, time stretches.
  c.d2h_bytes_per_s = 4.0 / 3.0;
  auto slow = Simulate(OneWorker(3, "0F0 0OFFLOAD0 0F1 0F2 0B2 0B1 0RELOAD0 0B0"), c);
  ASSERT_TRUE(slow.ok());
  EXPECT_DOUBLE_EQ(slow->peak_memory[0], 2.0);
  EXPECT_DOUBLE_EQ(Find(*slow, "0F2").start, 4.0);
  EXPECT_DOUBLE_EQ(slow->makespan, r->makespan + 2.0);
}

// With a RELEASE for the stash, compute ends leave its device copy alone: the slow copy (3 s,
// [1,4]) no longer stalls F1's end; F2 runs at [2,3] (3 units held); RELEASE0 after F2 waits
// for the copy until 4 and frees it there. The validator wants it after its OFFLOAD and before
// its RELOAD.
TEST(CopyEngineTest, ReleaseFreesTheDeviceCopyWhereItStandsAndWaitsForALateCopy) {
  CostModel c = Link(true);
  c.d2h_bytes_per_s = 4.0 / 3.0;
  const std::string order = "0F0 0OFFLOAD0 0F1 0F2 0RELEASE0 0B2 0B1 0RELOAD0 0B0";
  ASSERT_TRUE(ValidateSchedule(OneWorker(3, order)).ok()) << ValidateSchedule(OneWorker(3, order));
  auto r = Simulate(OneWorker(3, order), c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(Find(*r, "0F2").start, 2.0);
  EXPECT_DOUBLE_EQ(Find(*r, "0RELEASE0").end, 4.0);
  EXPECT_DOUBLE_EQ(Find(*r, "0B2").start, 4.0);
  EXPECT_DOUBLE_EQ(r->peak_memory[0], 3.0);
  const auto& curve = r->memory_curve[0];
  EXPECT_DOUBLE_EQ(curve.back().units, 0.0);
  // Text form round trip, and the validator's two rules.
  EXPECT_EQ(ToString(*ParseAction("0RELEASE0")), "0RELEASE0");
  const auto before = ValidateSchedule(
      OneWorker(3, "0F0 0RELEASE0 0OFFLOAD0 0F1 0F2 0B2 0B1 0RELOAD0 0B0"));
  EXPECT_NE(before.message().find("RELEASE without an OFFLOAD before it"), std::string::npos)
      << before;
  const auto after = ValidateSchedule(
      OneWorker(3, "0F0 0OFFLOAD0 0F1 0F2 0B2 0B1 0RELOAD0 0RELEASE0 0B0"));
  EXPECT_NE(after.message().find("RELEASE after its RELOAD"), std::string::npos) << after;
}

TEST(CopyEngineTest, ReloadAllocatesAtIssueAndGatesTheBackward) {
  // RELOAD0 issued at 7 (after BW1), copy 1 s: BW0 [8, 10]; +1 at 7.
  auto r = Simulate(OneWorker(3, "0F0 0OFFLOAD0 0F1 0F2 0B2 0B1 0RELOAD0 0B0"), Link(true));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(Find(*r, "0RELOAD0").start, 7.0);
  EXPECT_DOUBLE_EQ(Find(*r, "0B0").start, 8.0);
  EXPECT_DOUBLE_EQ(r->makespan, 10.0);
}

}  // namespace
}  // namespace pipetrain::schedule
