// SystemDeviceList of a CUDA build: the CUDA runtime's devices. On a host with the CUDA
// libraries but no driver or GPU, cudaGetDeviceCount fails (e.g. cudaErrorInsufficientDriver)
// and that reason is what --device reports. Listing creates no context (properties only).
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "worker/device/device_list.h"

namespace pipetrain::worker {
namespace {

class CudaRuntimeDevices : public DeviceList {
 public:
  absl::StatusOr<std::vector<DeviceInfo>> CudaDevices() const override {
    int count = 0;
    if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
      (void)cudaGetLastError();  // clear it: this process goes on without CUDA
      return absl::FailedPreconditionError(
          absl::StrCat("the CUDA runtime found no device (", cudaGetErrorName(err), ": ",
                       cudaGetErrorString(err), ")"));
    }
    if (count == 0) return absl::FailedPreconditionError("the CUDA runtime found no device");
    std::vector<DeviceInfo> devices;
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp prop{};
      if (cudaError_t err = cudaGetDeviceProperties(&prop, i); err != cudaSuccess) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cuda:", i, ": cudaGetDeviceProperties: ", cudaGetErrorString(err)));
      }
      DeviceInfo d;
      d.kind = v1::DEVICE_KIND_CUDA;
      d.index = i;
      d.name = prop.name;
      d.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
      d.compute_capability = absl::StrCat(prop.major, ".", prop.minor);
      // No free-memory query here: it would create a context on every device of the host.
      devices.push_back(std::move(d));
    }
    return devices;
  }
};

}  // namespace

std::unique_ptr<DeviceList> SystemDeviceList() { return std::make_unique<CudaRuntimeDevices>(); }

}  // namespace pipetrain::worker
