// DeviceList: the CUDA devices this process can use, behind an interface so that device
// selection is tested with a fake list. SystemDeviceList() is the real one: in a CUDA build it
// asks the CUDA runtime (a host with the libraries but no driver or GPU answers with the
// runtime's reason); in a build without CUDA it says so.
//
// Thread-safety: implementations are thread-safe.
#ifndef PIPETRAIN_WORKER_DEVICE_DEVICE_LIST_H_
#define PIPETRAIN_WORKER_DEVICE_DEVICE_LIST_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/device/device_info.h"

namespace pipetrain::worker {

class DeviceList {
 public:
  virtual ~DeviceList() = default;
  // Every usable CUDA device, by ordinal; FailedPrecondition saying why there is none (no
  // driver, no device, a build without CUDA). Never an empty vector.
  virtual absl::StatusOr<std::vector<DeviceInfo>> CudaDevices() const = 0;
};

// The process's devices (system_devices_cuda.cc or system_devices_none.cc, chosen at build time).
std::unique_ptr<DeviceList> SystemDeviceList();

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_DEVICE_DEVICE_LIST_H_
