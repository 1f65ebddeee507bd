// HostLock: a lock shared by every process of one machine (flock on a file), held while a worker
// runs its profiling step. Workers that share a machine's cores would otherwise time their
// stages at the same moment and measure each other's contention; the plan models sharing
// separately (coordinator/shared_cpu.h), so each profile should see the cores alone.
//
// Thread-safety: one instance per holder; the lock is released on destruction.
#ifndef PIPETRAIN_WORKER_SERVICE_HOST_LOCK_H_
#define PIPETRAIN_WORKER_SERVICE_HOST_LOCK_H_

#include <string>

namespace pipetrain::worker {

class HostLock {
 public:
  // Blocks until the lock on `path` is held. An empty path, or a file that cannot be opened,
  // holds nothing (held() false): profiling then goes on unserialized.
  explicit HostLock(const std::string& path);
  ~HostLock();
  HostLock(const HostLock&) = delete;
  HostLock& operator=(const HostLock&) = delete;

  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_HOST_LOCK_H_
