// HostMemory: how much memory this worker process may still take, so that Prepare can refuse a
// model whose weights, gradients and optimizer state would not fit, before allocating any of it.
//
// Thread-safety: pure functions (they read /proc and /sys).
#ifndef PIPETRAIN_WORKER_SERVICE_HOST_MEMORY_H_
#define PIPETRAIN_WORKER_SERVICE_HOST_MEMORY_H_

#include <cstdint>
#include <string>

namespace pipetrain::worker {

// The machine's MemAvailable, lowered to what a cgroup v2 memory limit (a container's) leaves
// above the cgroup's current use; 0 when neither can be read.
int64_t AvailableHostMemoryBytes();

// Parsers, exposed for tests. MemAvailable of a /proc/meminfo text in bytes (0: absent), and the
// headroom of a cgroup v2 `memory.max` ("max" or bytes) over `memory.current` (-1: unlimited or
// unparsable; 0 when the use is at or over the limit).
int64_t MemAvailableFromMeminfo(const std::string& meminfo);
int64_t CgroupMemoryHeadroom(const std::string& memory_max, const std::string& memory_current);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_HOST_MEMORY_H_
