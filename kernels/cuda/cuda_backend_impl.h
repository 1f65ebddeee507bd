// CudaBackend::Impl: the CUDA objects a CudaBackend owns (compute stream, device memory pool,
// cuBLAS handle bound to the stream, pinned staging of host inputs) and a row-major
// strided-batched GEMM helper shared by the CudaBackend translation units. Internal header.
// Thread-safety: owned by one CudaBackend; same rules.
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/host_staging.h"

namespace pipetrain::kernels::cuda {

inline cublasOperation_t Op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }
inline cudaDataType TypeOf(int element_bytes) {
  return element_bytes == 2 ? CUDA_R_16BF : CUDA_R_32F;
}

struct CudaBackend::Impl {
  explicit Impl(int device) : device(device) {}
  // Waits for the stream, then destroys everything (with the device current).
  ~Impl();

  const int device;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  cublasHandle_t handle = nullptr;
  std::unique_ptr<HostStaging> staging;

  // Row-major strided-batched GEMM with cblas-like arguments.
  absl::Status Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                    float* c, int64_t ldc, int64_t sc, int64_t batch) {
    PT_CUDA_RETURN_IF_ERROR(cublasSgemmStridedBatched(
        handle, Op(tb), Op(ta), static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
        &alpha, b, static_cast<int>(ldb), sb, a, static_cast<int>(lda), sa, &beta, c,
        static_cast<int>(ldc), sc, static_cast<int>(batch)));
    return absl::OkStatus();
  }
  // The same with typed inputs (CUDA_R_32F or CUDA_R_16BF; a and b may differ), fp32
  // accumulation and fp32 output: tensor cores for bf16 inputs.
  absl::Status GemmEx(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const void* a, cudaDataType at, int64_t lda, int64_t sa, const void* b,
                      cudaDataType bt, int64_t ldb, int64_t sb, float beta, float* c, int64_t ldc,
                      int64_t sc, int64_t batch) {
    PT_CUDA_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(
        handle, Op(tb), Op(ta), static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
        &alpha, b, bt, static_cast<int>(ldb), sb, a, at, static_cast<int>(lda), sa, &beta, c,
        CUDA_R_32F, static_cast<int>(ldc), sc, static_cast<int>(batch), CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
};

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
