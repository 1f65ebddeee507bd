// Shared CPU hosts: a plan whose CPU workers oversubscribe a host gets the shared-core simulation
// as its expected step time; other plans keep the plain simulation.
#include "coordinator/shared_cpu.h"

#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "schedule/shared_core_simulator.h"
#include "schedule/simulator.h"
#include "tests/coordinator/test_util.h"

namespace pipetrain::coordinator {
namespace {

using ::testing::HasSubstr;

// A 1F1B plan on 4 workers whose transfers cost nothing (so compute decides the step time).
struct FourWorkerPlan {
  FourWorkerPlan() {
    v1::JobSpec spec = testing::SmallSpec(4, 2);
    spec.mutable_training()->set_global_batch(8);
    planner::PlannedJob planned = planner::PlanJob(spec).value();
    schedule = std::move(planned.schedule);
    costs = std::move(planned.costs);
    costs.comm = 0;
    *plan.mutable_prediction() = planned.plan.prediction();
    plan.mutable_prediction()->set_makespan_s(schedule::Simulate(schedule, costs)->makespan);
  }
  void Apply(const std::vector<RankHost>& ranks) {
    ApplySharedCpu(ranks, schedule, costs, plan.mutable_prediction());
  }
  double SharedCores(std::vector<int> host, std::vector<double> cores,
                     std::vector<int> threads) const {
    return schedule::SimulateSharedCores(schedule, costs,
                                         {std::move(host), std::move(cores), std::move(threads)})
        .value();
  }
  schedule::Schedule schedule;
  schedule::CostModel costs;
  v1::Plan plan;  // its prediction
};

TEST(SharedCpuTest, FourWorkersOnTwoCoresGetTheSharedCoreSimulation) {
  FourWorkerPlan four;
  const v1::Plan& plan = four.plan;
  const double makespan = plan.prediction().makespan_s();
  four.Apply({{"box", 2, 1}, {"box", 2, 1}, {"box", 2, 1}, {"box", 2, 1}});
  const double expected = four.SharedCores({0, 0, 0, 0}, {2}, {1, 1, 1, 1});
  EXPECT_DOUBLE_EQ(plan.prediction().shared_cpu_step_s(), expected);
  EXPECT_GT(expected, makespan);
  const double work =
      std::accumulate(plan.prediction().busy_s().begin(), plan.prediction().busy_s().end(), 0.0);
  EXPECT_GE(expected, work / 2 - 1e-12);
  EXPECT_THAT(plan.prediction().shared_cpu_note(),
              HasSubstr("4 CPU workers share 2 cores on host box"));
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(plan.prediction()), expected);
}

TEST(SharedCpuTest, NothingWhenEveryThreadHasACoreOrTheHostIsUnknown) {
  FourWorkerPlan four;
  const v1::Plan& plan = four.plan;
  four.plan.mutable_prediction()->set_shared_cpu_step_s(9);  // from an earlier assignment
  four.plan.mutable_prediction()->set_shared_cpu_note("stale");
  four.Apply({{"a", 2, 1}, {"a", 2, 1}, {"b", 2, 1}, {"b", 2, 1}});
  EXPECT_EQ(plan.prediction().shared_cpu_step_s(), 0);
  EXPECT_EQ(plan.prediction().shared_cpu_note(), "");
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(plan.prediction()), plan.prediction().makespan_s());
  // No host (GPU, emulated) or unknown cores: left out, so "box" has 1 thread on 1 core.
  four.Apply({{"box", 1, 1}, {"", 1, 1}, {"box", 0, 1}, {"", 0, 1}});
  EXPECT_EQ(plan.prediction().shared_cpu_step_s(), 0);
  // A rank count that does not match the plan changes nothing.
  four.Apply({{"box", 1, 1}, {"box", 1, 1}});
  EXPECT_EQ(plan.prediction().shared_cpu_step_s(), 0);
}

TEST(SharedCpuTest, ThreadsCountAgainstTheCores) {
  // Two workers of 2 threads each on a 2-core host, two others on their own 4-core host.
  FourWorkerPlan four;
  const v1::Plan& plan = four.plan;
  four.Apply({{"a", 2, 2}, {"a", 2, 2}, {"b", 4, 1}, {"b", 4, 1}});
  EXPECT_DOUBLE_EQ(plan.prediction().shared_cpu_step_s(),
                   four.SharedCores({0, 0, 1, 1}, {2, 4}, {2, 2, 1, 1}));
  EXPECT_THAT(plan.prediction().shared_cpu_note(),
              HasSubstr("2 CPU workers share 2 cores on host a"));
}

TEST(SharedCpuTest, ReplicasShareTheCoresWithTheirSums) {
  // d = 2 replicas of a 2-rank pipeline on 4 CPU workers of one 2-core host: all four compute
  // at once, so the expected step is the shared-core simulation of both replicas with their
  // stage sums, not the plan of one replica (which has its 2 workers on 2 cores).
  v1::JobSpec spec = testing::SmallSpec(2, 2);
  spec.mutable_training()->set_global_batch(8);
  spec.mutable_parallelism()->set_data_parallel(2);
  // A slow device: compute, not the links, decides the step (as on the local cluster).
  planner::PlannerOptions slow;
  slow.device_flops_per_s = 1e6;
  planner::PlannedJob planned = planner::PlanJob(spec, slow).value();
  v1::Prediction prediction = planned.plan.prediction();
  ASSERT_EQ(prediction.stage_allreduce_s_size(), planned.schedule.num_stages);
  ASSERT_GT(prediction.data_parallel_step_s(), 0);
  const std::vector<RankHost> box(4, RankHost{"box", 2, 1});
  ApplySharedCpu(box, planned.schedule, planned.costs, &prediction);
  const schedule::ReplicaSums sums = {
      2, {prediction.stage_allreduce_s().begin(), prediction.stage_allreduce_s().end()}};
  const double expected = schedule::SimulateSharedCores(planned.schedule, planned.costs,
                                                        {{0, 0, 0, 0}, {2}, {1, 1, 1, 1}}, sums)
                              .value();
  EXPECT_DOUBLE_EQ(prediction.shared_cpu_step_s(), expected);
  EXPECT_GT(expected, prediction.data_parallel_step_s());
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(prediction), expected);
  EXPECT_THAT(prediction.shared_cpu_note(),
              HasSubstr("4 CPU workers share 2 cores on host box; simulated with shared cores, "
                        "2 replicas computing at once"));
  // With the step's CPU work (the sums' own CPU time, the optimizer step: the plan's
  // cpu_work) the step is the simulation with it, and longer.
  ASSERT_FALSE(planned.cpu_work.stage_sum_cpu_s.empty());
  ASSERT_FALSE(planned.cpu_work.stage_optimizer_cpu_s.empty());
  ApplySharedCpu(box, planned.schedule, planned.costs, &prediction, planned.cpu_work);
  const double with_cpu_work =
      schedule::SimulateSharedCores(planned.schedule, planned.costs,
                                    {{0, 0, 0, 0}, {2}, {1, 1, 1, 1}}, sums, planned.cpu_work)
          .value();
  EXPECT_DOUBLE_EQ(prediction.shared_cpu_step_s(), with_cpu_work);
  EXPECT_GT(with_cpu_work, expected);
  // Each replica on its own 2-core host: every worker has a core, nothing to correct.
  ApplySharedCpu({{"a", 2, 1}, {"a", 2, 1}, {"b", 2, 1}, {"b", 2, 1}}, planned.schedule,
                 planned.costs, &prediction);
  EXPECT_EQ(prediction.shared_cpu_step_s(), 0);
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(prediction), prediction.data_parallel_step_s());
  // A rank count that is not a multiple of the plan's ranks changes nothing.
  ApplySharedCpu({{"box", 1, 1}, {"box", 1, 1}, {"box", 1, 1}}, planned.schedule, planned.costs,
                 &prediction);
  EXPECT_EQ(prediction.shared_cpu_step_s(), 0);
}

}  // namespace
}  // namespace pipetrain::coordinator
