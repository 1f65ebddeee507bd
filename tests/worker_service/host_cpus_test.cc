// What a worker reports about the CPUs it computes on: the cgroup v2 quota parsing, and a real
// detection on this machine (a hostname and at least one CPU, never more than the affinity set).
#include "worker/service/host_cpus.h"

#include <sched.h>

#include "gtest/gtest.h"

namespace pipetrain::worker {
namespace {

TEST(HostCpusTest, CgroupQuotaRoundsUpAndUnlimitedIsZero) {
  EXPECT_EQ(CpusFromCgroupMax("max 100000"), 0);
  EXPECT_EQ(CpusFromCgroupMax("200000 100000"), 2);
  EXPECT_EQ(CpusFromCgroupMax("150000 100000"), 2);
  EXPECT_EQ(CpusFromCgroupMax("50000 100000\n"), 1);
  EXPECT_EQ(CpusFromCgroupMax(""), 0);
  EXPECT_EQ(CpusFromCgroupMax("abc 100000"), 0);
  EXPECT_EQ(CpusFromCgroupMax("100000 0"), 0);
  EXPECT_EQ(CpusFromCgroupMax("-5 100000"), 0);
}

TEST(HostCpusTest, DetectsThisMachine) {
  const HostCpus cpus = DetectHostCpus();
  EXPECT_FALSE(cpus.host.empty());
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_GE(cpus.cpus, 1);
  EXPECT_LE(cpus.cpus, CPU_COUNT(&set));
}

}  // namespace
}  // namespace pipetrain::worker
