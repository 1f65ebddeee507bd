// OpenBLAS picks its GEMM kernels for the CPU when it loads. Debian's OpenBLAS 0.3.21 does not
// know newer CPU models (e.g. Intel family 6 model 207) and falls back to its SSE3 "Prescott"
// kernels: 2-4x slower than its AVX2 ("Haswell") or AVX-512 ("SkylakeX") ones on the same core
// (measured with bench/kernels/blas_compare, docs/BENCHMARKS.md). This corrects that choice.
#ifndef PIPETRAIN_KERNELS_CPU_OPENBLAS_KERNELS_H_
#define PIPETRAIN_KERNELS_CPU_OPENBLAS_KERNELS_H_

#include <string>

#include "kernels/cpu/openblas_core_choice.h"

namespace pipetrain::kernels {

// The name of the kernel set OpenBLAS uses now ("Haswell", "SkylakeX", "Zen", "Prescott", ...).
std::string OpenBlasCoreName();

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_OPENBLAS_KERNELS_H_
