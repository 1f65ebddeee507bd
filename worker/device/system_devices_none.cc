// SystemDeviceList of a build without CUDA (PIPETRAIN_ENABLE_CUDA=OFF).
#include "worker/device/device_list.h"

namespace pipetrain::worker {
namespace {

class NoCudaDevices : public DeviceList {
 public:
  absl::StatusOr<std::vector<DeviceInfo>> CudaDevices() const override {
    return absl::FailedPreconditionError(
        "this pipetrain-worker was built without CUDA (PIPETRAIN_ENABLE_CUDA=OFF)");
  }
};

}  // namespace

std::unique_ptr<DeviceList> SystemDeviceList() { return std::make_unique<NoCudaDevices>(); }

}  // namespace pipetrain::worker
