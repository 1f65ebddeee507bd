// FreePort hands out each port once per machine while its caller lives: two picks of one
// process never coincide, and another process (any other open of the reservation) cannot take a
// port this process holds.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <set>
#include <string>

#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace pipetrain::subprocess {
namespace {

TEST(FreePortTest, PicksOfOneProcessAreDistinct) {
  std::set<int> ports;
  for (int i = 0; i < 300; ++i) {
    const int port = FreePort();
    EXPECT_GE(port, 10000);
    EXPECT_LT(port, 65536);
    EXPECT_TRUE(ports.insert(port).second) << "port " << port << " handed out twice";
  }
}

TEST(FreePortTest, AHeldPortIsReservedAgainstOtherProcesses) {
  const int port = FreePort();
  // Another process would open the reservation afresh and try to lock it: a new open file
  // description here conflicts exactly as one in another process does.
  const std::string path = "/tmp/pipetrain-ports/" + std::to_string(port);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0) << "port " << port << " is not reserved";
  ::close(fd);
}

}  // namespace
}  // namespace pipetrain::subprocess
