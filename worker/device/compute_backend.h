// The compute backend for a worker's device: the CPU backend (OpenBLAS), or in a CUDA build the
// CUDA backend on the chosen GPU. compute_backend_cuda.cc / compute_backend_none.cc provide it,
// chosen at build time, so no caller needs a preprocessor switch.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_WORKER_DEVICE_COMPUTE_BACKEND_H_
#define PIPETRAIN_WORKER_DEVICE_COMPUTE_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "worker/device/device_info.h"

namespace pipetrain::worker {

struct ComputeBackendOptions {
  int blas_threads = 1;    // CPU: OpenBLAS threads
  bool bf16_gemm = false;  // GEMM inputs in bf16, fp32 accumulation (the CPU rounds the inputs)
};

// FailedPrecondition when the device cannot be used (a CUDA device in a build without CUDA, or
// a device the runtime refuses), naming it.
absl::StatusOr<std::unique_ptr<kernels::Backend>> MakeComputeBackend(
    const DeviceInfo& device, const ComputeBackendOptions& options);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_DEVICE_COMPUTE_BACKEND_H_
