#include "kernels/cpu/gemm_choice.h"

namespace pipetrain::kernels {

// Measured with bench/kernels/blas_compare on the shapes of the peer model's chunks (hidden 64
// and 256; docs/BENCHMARKS.md): oneDNN runs the linear layers' forward, input-gradient and
// weight-gradient GEMMs 5-35% faster, except the two kinds of shape below, where OpenBLAS's
// AVX-512 kernels win. Held to its AVX2 kernels on an AVX-512 core (AMD EPYC with AVX-512,
// OPENBLAS_CORETYPE=Haswell, 2026-11-27) OpenBLAS lost those too: the tall weight gradient at
// hidden 256 125 GFLOP/s against oneDNN's 198, attention's narrow products 100-102 against
// 207 at hidden 256 and 74-76 against 76-79 at hidden 64.
GemmLibrary ChooseGemmLibrary(const GemmShape& shape, bool openblas_narrower) {
  if (openblas_narrower) return GemmLibrary::kOneDnn;
  // Narrow outputs: attention's per-head products (n = head dim).
  if (shape.n < 64) return GemmLibrary::kOpenBlas;
  // A tall weight gradient, dW += X^T dY with m >= 4n and m >= 1024 (the MLP's down projection
  // at hidden >= 256; at hidden 64, m = 256, oneDNN is faster).
  if (shape.trans_a && shape.m >= 4 * shape.n && shape.m >= 1024) return GemmLibrary::kOpenBlas;
  return GemmLibrary::kOneDnn;
}

}  // namespace pipetrain::kernels
