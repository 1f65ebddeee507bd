// HostLock: one holder at a time per file across holders (flock), released on destruction; an
// empty path holds nothing.
#include "worker/service/host_lock.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pipetrain::worker {
namespace {

std::string LockPath() {
  char tmpl[] = "/tmp/pipetrain-host-lock-XXXXXX";
  const int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  close(fd);
  return tmpl;
}

TEST(HostLockTest, SecondHolderWaitsForTheFirst) {
  const std::string path = LockPath();
  auto first = std::make_unique<HostLock>(path);
  ASSERT_TRUE(first->held());
  std::atomic<bool> second_held{false};
  std::thread second([&] {
    HostLock lock(path);
    second_held = lock.held();
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(second_held) << "the second holder got the lock while the first held it";
  first.reset();
  second.join();
  EXPECT_TRUE(second_held);
  std::remove(path.c_str());
}

TEST(HostLockTest, EmptyOrUnopenablePathHoldsNothing) {
  EXPECT_FALSE(HostLock("").held());
  EXPECT_FALSE(HostLock("/nonexistent-dir/pipetrain.lock").held());
}

}  // namespace
}  // namespace pipetrain::worker
