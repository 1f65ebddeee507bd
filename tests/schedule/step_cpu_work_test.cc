// The step's CPU work besides F, B and W on shared cores (schedule/step_cpu_work.h): each stage's
// gradient-sum work on every replica and each worker's optimizer step, hand-timed on small cases
// where every time is exact in binary (so the expectations are exact).
#include "schedule/step_cpu_work.h"

#include "gtest/gtest.h"
#include "schedule/shared_core_simulator.h"

namespace pipetrain::schedule {
namespace {

// One stage on one worker, one microbatch: F B W, 1 s each.
Schedule OneStage() {
  Schedule s = MakeEmptySchedule("hand", 1, 1, {0});
  s.worker_actions[0] = {{ActionKind::kF, 0, 0}, {ActionKind::kB, 0, 0}, {ActionKind::kW, 0, 0}};
  return s;
}

CostModel UnitCosts(int stages) {
  CostModel costs;
  costs.stages.assign(stages, StageCost{});  // F = B = W = 1
  return costs;
}

TEST(StepCpuWorkTest, BytesOverRatesPerStage) {
  const StepCpuWork two = StepCpuWorkFromBytes({1000, 3000}, 2, 2000, 4000);
  EXPECT_EQ(two.stage_sum_cpu_s, (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(two.stage_optimizer_cpu_s, (std::vector<double>{0.25, 0.75}));
  // One replica sums nothing; a rate of 0 leaves its term out.
  const StepCpuWork one = StepCpuWorkFromBytes({1000, 3000}, 1, 2000, 0);
  EXPECT_TRUE(one.stage_sum_cpu_s.empty());
  EXPECT_TRUE(one.stage_optimizer_cpu_s.empty());
}

TEST(StepCpuWorkTest, TwoReplicasSumAndStepOnTheirOwnDevicesAndOnOneCore) {
  const Schedule s = OneStage();
  const CostModel costs = UnitCosts(1);
  const ReplicaSums sums{2, {2.0}};  // 2 hops of 1 s
  const StepCpuWork cpu{{0.5}, {0.25}};
  const CoreSharing own = {{-1, -1}, {}, {1, 1}};
  // Without the CPU work: W ends at 3, replica 0 sends, replica 1 has it at 4 and sends the
  // complete sum back, which arrives at 5.
  EXPECT_EQ(SimulateSharedCores(s, costs, own, sums).value(), 5.0);
  // With it: replica 0 copies its sum out (3 to 3.5) and sends; replica 1 has it at 4.5, adds
  // (4.5 to 5), sends the complete sum and steps its optimizer (5 to 5.25); replica 0 has the
  // complete sum at 6 and steps (6 to 6.25).
  EXPECT_EQ(SimulateSharedCores(s, costs, own, sums, cpu).value(), 6.25);
  // One shared core: F B W at half speed to 6; replica 0's sum work alone (6 to 6.5), replica 1
  // gets the sum at 7.5 and adds (7.5 to 8), steps (8 to 8.25); replica 0 gets the complete sum
  // at 9 and steps (9 to 9.25).
  const CoreSharing one_core = {{0, 0}, {1.0}, {1, 1}};
  EXPECT_EQ(SimulateSharedCores(s, costs, one_core, sums).value(), 8.0);
  EXPECT_EQ(SimulateSharedCores(s, costs, one_core, sums, cpu).value(), 9.25);
}

TEST(StepCpuWorkTest, OneReplicaStepsItsOptimizerAfterItsLastAction) {
  // The sum work needs replicas; the optimizer step runs for every job.
  const CoreSharing own = {{-1}, {}, {1}};
  EXPECT_EQ(SimulateSharedCores(OneStage(), UnitCosts(1), own, {}, {{0.5}, {0.25}}).value(), 3.25);
  // Two workers (stage s on worker s) on one core, 1F1B of one microbatch: F0 0-1, F1 1-2, B1
  // 2-3, then W1 and B0 share the core (3 to 5); worker 1's optimizer step (0.25 of work) and W0
  // share it (5 to 5.5), W0 ends alone at 6.25 and worker 0 steps (6.25 to 6.5).
  Schedule s = MakeEmptySchedule("hand", 2, 1, {0, 1});
  s.worker_actions[0] = {{ActionKind::kF, 0, 0}, {ActionKind::kB, 0, 0}, {ActionKind::kW, 0, 0}};
  s.worker_actions[1] = {{ActionKind::kF, 1, 0}, {ActionKind::kB, 1, 0}, {ActionKind::kW, 1, 0}};
  const CoreSharing one_core = {{0, 0}, {1.0}, {1, 1}};
  EXPECT_EQ(SimulateSharedCores(s, UnitCosts(2), one_core).value(), 6.0);
  EXPECT_EQ(SimulateSharedCores(s, UnitCosts(2), one_core, {}, {{}, {0.25, 0.25}}).value(), 6.5);
}

TEST(StepCpuWorkTest, RejectsMismatchedOrNegativeTimes) {
  const CoreSharing own = {{-1}, {}, {1}};
  EXPECT_EQ(SimulateSharedCores(OneStage(), UnitCosts(1), own, {}, {{}, {1, 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimulateSharedCores(OneStage(), UnitCosts(1), own, {}, {{-1}, {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::schedule
