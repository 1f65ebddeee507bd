// Simulate: exact timings, implicit and explicit comm, the memory model, offload, deadlock.
#include "schedule/simulator.h"

#include <string>

#include "gtest/gtest.h"
#include "schedule/cost_model.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/validator.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

using ::pipetrain::schedule::testing::FromRows;

TEST(SimulatorTest, ImplicitCommDelaysCrossWorkerInputs) {
  Schedule s = FromRows(1, {0, 1}, {"0F0 0B0", "1F0 1B0"});
  CostModel c = UniformCostModel(2, 1, 1, 1, 1, /*comm=*/0.5);
  auto r = Simulate(s, c);
  ASSERT_TRUE(r.ok()) << r.status();
  // F0 [0,1]; F1 [1.5,2.5]; BW1 [2.5,4.5]; BW0 [5,7].
  EXPECT_DOUBLE_EQ(r->makespan, 7.0);
  ASSERT_EQ(r->timeline.size(), 4u);
  EXPECT_DOUBLE_EQ(r->timeline[1].start, 5.0);
  EXPECT_DOUBLE_EQ(r->timeline[2].start, 1.5);
  EXPECT_DOUBLE_EQ(r->busy[0], 3.0);
  EXPECT_DOUBLE_EQ(r->span[0], 7.0);
  EXPECT_DOUBLE_EQ(r->span[1], 3.0);
  EXPECT_DOUBLE_EQ(r->bubble_ratio, 1.0 - 3.0 / 7.0);
}

TEST(SimulatorTest, ExplicitTransfersMatchImplicitComm) {
  for (const char* name : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2"}) {
    for (double comm : {0.0, 0.7}) {
      PipelineSpec spec;
      spec.num_workers = 4;
      spec.num_microbatches = 8;
      spec.f = 1.0;
      spec.b = 1.5;
      spec.w = 0.5;
      spec.comm = comm;
      auto s = Generate(name, spec);
      ASSERT_TRUE(s.ok()) << s.status();
      auto t = AddTransfers(*s);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_TRUE(ValidateSchedule(*t).ok());
      const CostModel costs = CostModelFor(spec, s->ChunksPerWorker());
      auto a = Simulate(*s, costs);
      auto b = Simulate(*t, costs);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_DOUBLE_EQ(a->makespan, b->makespan) << name << " comm=" << comm;
      EXPECT_DOUBLE_EQ(a->bubble_ratio, b->bubble_ratio) << name;
      EXPECT_EQ(a->peak_memory, b->peak_memory) << name;
    }
  }
}

TEST(SimulatorTest, AddTransfersCountsAndSkipsSameWorkerEdges) {
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  auto s = Generate("1f1b", spec);
  ASSERT_TRUE(s.ok());
  auto t = AddTransfers(*s);
  ASSERT_TRUE(t.ok());
  int transfers = 0;
  for (const auto& list : t->worker_actions) {
    for (const Action& a : list) transfers += IsTransfer(a.kind);
  }
  EXPECT_EQ(transfers, 3 /*edges*/ * 4 /*SEND/RECV x F/B*/ * 8);
  // One worker holding both stages: no transfers at all.
  spec.num_workers = 1;
  spec.chunks_per_worker = 2;
  auto one = Generate("interleaved-1f1b", spec);
  ASSERT_TRUE(one.ok()) << one.status();
  auto t1 = AddTransfers(*one);
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(t1->worker_actions[0].size(), one->worker_actions[0].size());
  // Already explicit: rejected.
  EXPECT_FALSE(AddTransfers(*t).ok());
  // Invalid inputs are caught by the one validation of the output (a missing backward), or
  // before the rewrite indexes a stage that does not exist.
  Schedule missing = FromRows(1, {0, 1}, {"0F0 0B0", "1F0"});
  absl::StatusOr<Schedule> rejected = AddTransfers(missing);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  Schedule outside = FromRows(1, {0, 1}, {"0F0 0B0", "1F0 1B0"});
  outside.worker_actions[1].push_back({ActionKind::kF, 7, 0});
  rejected = AddTransfers(outside);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rejected.status().message().find("outside stages 0..1"), std::string::npos)
      << rejected.status();
}

TEST(SimulatorTest, MemoryModelSplitsReleaseBetweenBAndW) {
  Schedule s = FromRows(2, {0}, {"0F0 0F1 0I0 0I1 0W0 0W1"});
  CostModel c = UniformCostModel(1, 1, 1, 1, 1);
  c.stages[0].freed_by_b = 0.25;
  auto r = Simulate(s, c);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->peak_memory[0], 2.0);
  // Curve: 1 from 0, 2 from 1, 1.75 from 3 (B0 ends), 1.5 from 4, 0.75 from 5, 0 from 6.
  const auto& curve = r->memory_curve[0];
  ASSERT_EQ(curve.size(), 6u);
  EXPECT_DOUBLE_EQ(curve[0].units, 1.0);
  EXPECT_DOUBLE_EQ(curve[2].time, 3.0);
  EXPECT_DOUBLE_EQ(curve[2].units, 1.75);
  EXPECT_DOUBLE_EQ(curve[3].units, 1.5);
  EXPECT_DOUBLE_EQ(curve[4].units, 0.75);
  EXPECT_DOUBLE_EQ(curve.back().units, 0.0);
}

TEST(SimulatorTest, OffloadLowersPeakAndReloadGatesBackward) {
  const std::vector<std::string> plain = {"0F0 0F1 0F2 0B2 0B1 0B0"};
  const std::vector<std::string> off = {"0F0 0OFFLOAD0 0F1 0F2 0B2 0B1 0RELOAD0 0B0"};
  CostModel c = UniformCostModel(1, 1, 1, 1, 1);
  c.offload = 0.5;
  c.reload = 0.5;
  auto a = Simulate(FromRows(3, {0}, plain), c);
  auto b = Simulate(FromRows(3, {0}, off), c);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status();
  EXPECT_DOUBLE_EQ(a->peak_memory[0], 3.0);
  EXPECT_DOUBLE_EQ(b->peak_memory[0], 2.0);
  EXPECT_DOUBLE_EQ(a->makespan, 9.0);
  // B1 ends at 7; RELOAD0 runs [7, 7.5]; B0 [7.5, 9.5].
  EXPECT_DOUBLE_EQ(b->makespan, 9.5);
}

TEST(SimulatorTest, DeadlockIsReportedPerWorker) {
  Schedule s = FromRows(2, {0, 1}, {"0F0 0B0 0F1 0B1", "1F0 1F1 1B0 1B1"});
  auto r = Simulate(s, UniformCostModel(2, 1, 1, 1, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("deadlocked"), std::string::npos) << msg;
  EXPECT_NE(msg.find("worker 0 step 1 0B0: waiting for backward"), std::string::npos) << msg;
  EXPECT_NE(msg.find("worker 1 step 1 1F1: waiting for F"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1F1]"), std::string::npos) << msg;
}

TEST(SimulatorTest, RejectsCostModelOfWrongSize) {
  Schedule s = FromRows(1, {0, 1}, {"0F0 0B0", "1F0 1B0"});
  EXPECT_EQ(Simulate(s, UniformCostModel(1, 1, 1, 1, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SimulatorTest, ZbH1MatchesClosedFormWithUnequalCosts) {
  // (p-1)(F+B-W) / (m(F+B+W) + (p-1)(F+B-W)), here F=1, B=1, W=0.5 (W < F+B).
  for (int p : {2, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p + 1}) {
      PipelineSpec spec;
      spec.num_workers = p;
      spec.num_microbatches = m;
      spec.f = 1.0;
      spec.b = 1.0;
      spec.w = 0.5;
      auto s = Generate("zb-h1", spec);
      ASSERT_TRUE(s.ok());
      auto r = Simulate(*s, CostModelFor(spec, 1));
      ASSERT_TRUE(r.ok());
      const double bubble = (p - 1) * 1.5;
      EXPECT_NEAR(r->bubble_ratio, bubble / (m * 2.5 + bubble), 1e-12) << p << " " << m;
    }
  }
}

}  // namespace
}  // namespace pipetrain::schedule
