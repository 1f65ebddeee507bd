#include "worker/service/host_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

namespace pipetrain::worker {

HostLock::HostLock(const std::string& path) {
  if (path.empty()) return;
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) return;
  int rc;
  do {
    rc = flock(fd_, LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    close(fd_);
    fd_ = -1;
  }
}

HostLock::~HostLock() {
  if (fd_ >= 0) close(fd_);  // closing releases the flock
}

}  // namespace pipetrain::worker
