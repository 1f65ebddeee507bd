// MakeComputeBackend of a build without CUDA: the CPU backend only.
#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/device/compute_backend.h"

namespace pipetrain::worker {

absl::StatusOr<std::unique_ptr<kernels::Backend>> MakeComputeBackend(
    const DeviceInfo& device, const ComputeBackendOptions& options) {
  if (device.kind == v1::DEVICE_KIND_CUDA) {
    return absl::FailedPreconditionError(absl::StrCat(
        Describe(device), ": this pipetrain-worker was built without CUDA"));
  }
  kernels::CpuBackendOptions cpu;
  cpu.blas_threads = options.blas_threads;
  cpu.bf16_gemm = options.bf16_gemm;
  return std::unique_ptr<kernels::Backend>(new kernels::CpuBackend(cpu));
}

}  // namespace pipetrain::worker
