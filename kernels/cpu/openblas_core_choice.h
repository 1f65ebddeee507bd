// Which OpenBLAS kernel set a CPU should run when OpenBLAS's own detection fell back to a
// pre-AVX2 one (openblas_kernels.h applies it). Pure: no OpenBLAS needed, so bench/kernels'
// blas_compare applies the same choice to the libraries it loads.
#ifndef PIPETRAIN_KERNELS_CPU_OPENBLAS_CORE_CHOICE_H_
#define PIPETRAIN_KERNELS_CPU_OPENBLAS_CORE_CHOICE_H_

#include <string>

namespace pipetrain::kernels {

// True when AVX-512 F, BW, DQ and VL are all available (OpenBLAS's SkylakeX kernels need them).
bool CpuHasAvx512();

// The kernel set this CPU should use when OpenBLAS fell back to a pre-AVX2 one although the CPU
// has AVX2 and FMA: "SkylakeX" with AVX-512, else "Haswell"; empty when OpenBLAS's own choice
// stands (it chose an AVX2-or-newer set, the CPU has no AVX2/FMA, or the user set
// OPENBLAS_CORETYPE). `core` is what openblas_get_corename() says.
std::string OpenBlasCoreCorrection(const std::string& core, bool avx2_fma, bool avx512,
                                   bool user_set_coretype);

// True for OpenBLAS's x86-64 kernel sets that use AVX-512 ("SkylakeX", "Cooperlake",
// "SapphireRapids"); `core` is what openblas_get_corename() says.
bool OpenBlasCoreUsesAvx512(const std::string& core);

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_OPENBLAS_CORE_CHOICE_H_
