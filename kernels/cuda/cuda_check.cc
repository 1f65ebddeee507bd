#include "kernels/cuda/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace pipetrain::kernels::cuda {

absl::Status ToStatus(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(expr, " failed at ", file, ":", line, ": ",
                                       cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status ToStatus(cublasStatus_t err, const char* expr, const char* file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg =
      absl::StrCat(expr, " failed at ", file, ":", line, ": cuBLAS status ", static_cast<int>(err));
  if (err == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

}  // namespace pipetrain::kernels::cuda
