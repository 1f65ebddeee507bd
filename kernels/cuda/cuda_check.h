// The one checking macro for CUDA runtime and cuBLAS calls: PT_CUDA_RETURN_IF_ERROR(expr) turns a
// failing cudaError_t / cublasStatus_t into an absl::Status (Internal, or ResourceExhausted for
// out-of-memory) naming the call, file and line, and returns it from the enclosing function.
// Thread-safety: stateless.
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_CHECK_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace pipetrain::kernels::cuda {

absl::Status ToStatus(cudaError_t err, const char* expr, const char* file, int line);
absl::Status ToStatus(cublasStatus_t err, const char* expr, const char* file, int line);

}  // namespace pipetrain::kernels::cuda

#define PT_CUDA_RETURN_IF_ERROR(expr)                                            \
  do {                                                                           \
    ::absl::Status pt_cuda_status_ =                                             \
        ::pipetrain::kernels::cuda::ToStatus((expr), #expr, __FILE__, __LINE__); \
    if (!pt_cuda_status_.ok()) return pt_cuda_status_;                           \
  } while (0)

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_CHECK_H_
