// GemmRouter: runs every fp32 GEMM of the CPU backend (row-major, C = alpha op(A) op(B) + beta C)
// through OpenBLAS or oneDNN, per shape (gemm_choice.h) unless told to use one library.
#ifndef PIPETRAIN_KERNELS_CPU_GEMM_ROUTER_H_
#define PIPETRAIN_KERNELS_CPU_GEMM_ROUTER_H_

#include <cstdint>

#include "kernels/cpu/gemm_choice.h"

namespace pipetrain::kernels {

enum class GemmRouting { kPerShape, kOpenBlasOnly, kOneDnnOnly };

// Runs GEMMs through the library `routing` picks. `threads` is the thread count a library may
// use (oneDNN's OpenMP count belongs to the calling thread and is set here; OpenBLAS's is
// process-wide and set by CpuBackend).
struct GemmRouter {
  GemmRouting routing = GemmRouting::kPerShape;
  int threads = 1;
  // kPerShape: OpenBLAS runs narrower kernels than the core has (gemm_choice.h); CpuBackend
  // sets it from the kernel set OpenBLAS loaded.
  bool openblas_narrower = false;

  void Run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc) const;
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_GEMM_ROUTER_H_
