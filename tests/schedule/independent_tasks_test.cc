// RunIndependentTasks (schedule/independent_tasks.h): every task runs exactly once, whatever the
// thread count, and results written to per-task slots come out as a sequential loop's.
#include "schedule/independent_tasks.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pipetrain::schedule {
namespace {

TEST(IndependentTasksTest, EachTaskRunsOnceIntoItsSlot) {
  for (int threads : {0, 1, 2, 4, 64}) {
    for (int n : {0, 1, 3, 100}) {
      std::vector<long> slot(n, -1);
      std::vector<std::atomic<int>> runs(n);
      RunIndependentTasks(
          n,
          [&](int i) {
            runs[i].fetch_add(1);
            long x = 0;
            for (int k = 0; k <= i * 1000; ++k) x += k % 7;  // uneven work
            slot[i] = x;
          },
          threads);
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(runs[i].load(), 1) << "threads " << threads << " n " << n << " task " << i;
        long x = 0;
        for (int k = 0; k <= i * 1000; ++k) x += k % 7;
        EXPECT_EQ(slot[i], x) << "threads " << threads << " task " << i;
      }
    }
  }
}

TEST(IndependentTasksTest, UsesMoreThanOneThreadWhereThereAreCores) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one hardware thread";
  // Two tasks that each wait for the other to start finish only if they run at once.
  std::atomic<int> started{0};
  RunIndependentTasks(
      2,
      [&](int) {
        started.fetch_add(1);
        while (started.load() < 2) std::this_thread::yield();
      },
      2);
  EXPECT_EQ(started.load(), 2);
}

}  // namespace
}  // namespace pipetrain::schedule
