// The shared-CPU bound: CPU workers of one host with fewer cores than compute threads need at
// least their CPU time / cores per step; other workers (no host, unknown cores) share nothing.
#include "coordinator/shared_cpu.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pipetrain::coordinator {
namespace {

using ::testing::HasSubstr;

v1::Prediction Busy(double makespan, std::vector<double> busy) {
  v1::Prediction p;
  p.set_makespan_s(makespan);
  for (double b : busy) p.add_busy_s(b);
  return p;
}

TEST(SharedCpuTest, FourWorkersOnTwoCoresNeedHalfTheirSummedBusyTime) {
  v1::Prediction p = Busy(0.07, {0.06, 0.05, 0.06, 0.07});
  ApplySharedCpuBound({{"box", 2, 1}, {"box", 2, 1}, {"box", 2, 1}, {"box", 2, 1}}, &p);
  EXPECT_DOUBLE_EQ(p.shared_cpu_step_s(), (0.06 + 0.05 + 0.06 + 0.07) / 2);
  EXPECT_THAT(p.shared_cpu_note(), HasSubstr("4 CPU workers share 2 cores on host box"));
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(p), 0.12);
}

TEST(SharedCpuTest, NoBoundWhenEveryThreadHasACore) {
  v1::Prediction p = Busy(0.07, {0.06, 0.05});
  ApplySharedCpuBound({{"box", 2, 1}, {"box", 2, 1}}, &p);
  EXPECT_EQ(p.shared_cpu_step_s(), 0);
  EXPECT_EQ(p.shared_cpu_note(), "");
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(p), 0.07);
}

TEST(SharedCpuTest, ThreadsCountAndTheBusiestHostWins) {
  // Host a: 2 workers x 2 threads on 2 cores -> (0.03 + 0.03) * 2 / 2 = 0.06.
  // Host b: 3 workers x 1 thread on 1 core -> 0.01 + 0.02 + 0.02 = 0.05.
  v1::Prediction p = Busy(0.04, {0.03, 0.03, 0.01, 0.02, 0.02});
  ApplySharedCpuBound({{"a", 2, 2}, {"a", 2, 2}, {"b", 1, 1}, {"b", 1, 1}, {"b", 1, 1}}, &p);
  EXPECT_DOUBLE_EQ(p.shared_cpu_step_s(), 0.06);
  EXPECT_THAT(p.shared_cpu_note(), HasSubstr("2 CPU workers share 2 cores on host a"));
}

TEST(SharedCpuTest, UnknownHostsAndABoundBelowTheSimulationAreCleared) {
  v1::Prediction p = Busy(0.5, {0.06, 0.05, 0.06});
  p.set_shared_cpu_step_s(9);  // from an earlier assignment
  p.set_shared_cpu_note("stale");
  ApplySharedCpuBound({{"box", 1, 1}, {"", 1, 1}, {"box", 0, 1}}, &p);
  // Only rank 0 counts on "box" (rank 1: no host; rank 2: unknown cores): 1 thread, 1 core.
  EXPECT_EQ(p.shared_cpu_step_s(), 0);
  EXPECT_EQ(p.shared_cpu_note(), "");
  // Oversubscribed, but the simulation (0.5 s) is already longer than 0.11 s: no bound.
  ApplySharedCpuBound({{"box", 1, 1}, {"box", 1, 1}, {"box", 1, 1}}, &p);
  EXPECT_EQ(p.shared_cpu_step_s(), 0);
}

}  // namespace
}  // namespace pipetrain::coordinator
