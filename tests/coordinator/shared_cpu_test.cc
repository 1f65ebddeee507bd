// Shared CPU hosts: a plan whose CPU workers oversubscribe a host gets the shared-core simulation
// as its expected step time; other plans keep the plain simulation.
#include "coordinator/shared_cpu.h"

#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "schedule/codec/plan_proto.h"
#include "schedule/shared_core_simulator.h"
#include "schedule/simulator.h"
#include "tests/coordinator/test_util.h"

namespace pipetrain::coordinator {
namespace {

using ::testing::HasSubstr;

// A 1F1B plan on 4 workers whose transfers cost nothing (so compute decides the step time).
v1::Plan FourWorkerPlan() {
  v1::JobSpec spec = testing::SmallSpec(4, 2);
  spec.mutable_training()->set_global_batch(8);
  v1::Plan plan = planner::PlanJob(spec).value().plan;
  plan.set_comm_s(0);
  plan.mutable_prediction()->set_makespan_s(
      schedule::Simulate(schedule::ScheduleFromProto(plan).value(),
                         schedule::CostModelFromProto(plan))
          ->makespan);
  return plan;
}

double SharedCores(const v1::Plan& plan, std::vector<int> host, std::vector<double> cores,
                   std::vector<int> threads) {
  return schedule::SimulateSharedCores(schedule::ScheduleFromProto(plan).value(),
                                       schedule::CostModelFromProto(plan),
                                       {std::move(host), std::move(cores), std::move(threads)})
      .value();
}

TEST(SharedCpuTest, FourWorkersOnTwoCoresGetTheSharedCoreSimulation) {
  v1::Plan plan = FourWorkerPlan();
  const double makespan = plan.prediction().makespan_s();
  ApplySharedCpu({{"box", 2, 1}, {"box", 2, 1}, {"box", 2, 1}, {"box", 2, 1}}, &plan);
  const double expected = SharedCores(plan, {0, 0, 0, 0}, {2}, {1, 1, 1, 1});
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
  v1::Plan plan = FourWorkerPlan();
  plan.mutable_prediction()->set_shared_cpu_step_s(9);  // from an earlier assignment
  plan.mutable_prediction()->set_shared_cpu_note("stale");
  ApplySharedCpu({{"a", 2, 1}, {"a", 2, 1}, {"b", 2, 1}, {"b", 2, 1}}, &plan);
  EXPECT_EQ(plan.prediction().shared_cpu_step_s(), 0);
  EXPECT_EQ(plan.prediction().shared_cpu_note(), "");
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(plan.prediction()), plan.prediction().makespan_s());
  // No host (GPU, emulated) or unknown cores: left out, so "box" has 1 thread on 1 core.
  ApplySharedCpu({{"box", 1, 1}, {"", 1, 1}, {"box", 0, 1}, {"", 0, 1}}, &plan);
  EXPECT_EQ(plan.prediction().shared_cpu_step_s(), 0);
  // A rank count that does not match the plan changes nothing.
  ApplySharedCpu({{"box", 1, 1}, {"box", 1, 1}}, &plan);
  EXPECT_EQ(plan.prediction().shared_cpu_step_s(), 0);
}

TEST(SharedCpuTest, ThreadsCountAgainstTheCores) {
  // Two workers of 2 threads each on a 2-core host, two others on their own 4-core host.
  v1::Plan plan = FourWorkerPlan();
  ApplySharedCpu({{"a", 2, 2}, {"a", 2, 2}, {"b", 4, 1}, {"b", 4, 1}}, &plan);
  EXPECT_DOUBLE_EQ(plan.prediction().shared_cpu_step_s(),
                   SharedCores(plan, {0, 0, 1, 1}, {2, 4}, {2, 2, 1, 1}));
  EXPECT_THAT(plan.prediction().shared_cpu_note(),
              HasSubstr("2 CPU workers share 2 cores on host a"));
}

}  // namespace
}  // namespace pipetrain::coordinator
