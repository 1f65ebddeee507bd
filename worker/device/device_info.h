// DeviceInfo: what a worker knows about the device it computes on, as it registers it with the
// coordinator (RegisterWorkerRequest) and uses it to build its backend.
//
// Thread-safety: value type.
#ifndef PIPETRAIN_WORKER_DEVICE_DEVICE_INFO_H_
#define PIPETRAIN_WORKER_DEVICE_DEVICE_INFO_H_

#include <cstdint>
#include <string>

#include "pipetrain/v1/common.pb.h"

namespace pipetrain::worker {

struct DeviceInfo {
  v1::DeviceKind kind = v1::DEVICE_KIND_CPU;
  int index = 0;                   // CUDA ordinal; 0 for the CPU
  std::string name;                // e.g. "NVIDIA H100 80GB HBM3"; the CPU: "cpu"
  int64_t total_memory_bytes = 0;  // device memory; 0 for the CPU (host memory is separate)
  std::string compute_capability;  // "9.0"; empty for the CPU
};

// "cuda:1 (NVIDIA H100 80GB HBM3, 79.1 GiB, sm 9.0)" or "cpu".
std::string Describe(const DeviceInfo& device);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_DEVICE_DEVICE_INFO_H_
