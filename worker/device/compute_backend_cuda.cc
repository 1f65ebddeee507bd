// MakeComputeBackend of a CUDA build: the CUDA backend for CUDA devices, else the CPU backend.
#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "worker/device/compute_backend.h"

namespace pipetrain::worker {

absl::StatusOr<std::unique_ptr<kernels::Backend>> MakeComputeBackend(
    const DeviceInfo& device, const ComputeBackendOptions& options) {
  if (device.kind == v1::DEVICE_KIND_CUDA) {
    kernels::cuda::CudaBackendOptions cuda;
    cuda.device = device.index;
    cuda.bf16_gemm = options.bf16_gemm;
    absl::StatusOr<std::unique_ptr<kernels::cuda::CudaBackend>> backend =
        kernels::cuda::CudaBackend::Create(cuda);
    if (!backend.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(Describe(device), ": ", backend.status().message()));
    }
    return std::unique_ptr<kernels::Backend>(std::move(*backend));
  }
  kernels::CpuBackendOptions cpu;
  cpu.blas_threads = options.blas_threads;
  cpu.bf16_gemm = options.bf16_gemm;
  return std::unique_ptr<kernels::Backend>(new kernels::CpuBackend(cpu));
}

}  // namespace pipetrain::worker
