// OpenBLAS picks its GEMM kernels for the CPU when it loads. Debian's OpenBLAS 0.3.21 does not
// know newer CPU models (e.g. Intel family 6 model 207) and falls back to its SSE3 "Prescott"
// kernels: 2-4x slower than its AVX2 ("Haswell") or AVX-512 ("SkylakeX") ones on the same core
// (measured with bench/kernels/blas_compare, docs/BENCHMARKS.md). This corrects that choice.
#ifndef PIPETRAIN_KERNELS_CPU_OPENBLAS_KERNELS_H_
#define PIPETRAIN_KERNELS_CPU_OPENBLAS_KERNELS_H_

#include <string>

namespace pipetrain::kernels {

// The name of the kernel set OpenBLAS uses now ("Haswell", "SkylakeX", "Zen", "Prescott", ...).
std::string OpenBlasCoreName();

// The kernel set this CPU should use when OpenBLAS fell back to a pre-AVX2 one although the CPU
// has AVX2 and FMA: "SkylakeX" with AVX-512 (F, BW, DQ, VL), else "Haswell"; empty when OpenBLAS's
// own choice stands (it chose an AVX2-or-newer set, the CPU has no AVX2/FMA, or the user set
// OPENBLAS_CORETYPE). Pure: `core` is OpenBlasCoreName().
std::string OpenBlasCoreCorrection(const std::string& core, bool avx2_fma, bool avx512,
                                   bool user_set_coretype);

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_OPENBLAS_KERNELS_H_
