// What the running x86-64 CPU can execute, asked once (cpuid via the compiler's builtins).
#ifndef PIPETRAIN_KERNELS_CPU_CPU_FEATURES_H_
#define PIPETRAIN_KERNELS_CPU_CPU_FEATURES_H_

namespace pipetrain::kernels {

// True when AVX2 and FMA3 are both available (every CI machine: AMD Zen and Intel since
// Haswell); false on other architectures.
bool CpuHasAvx2Fma();
// True when AVX-512F is available as well (and the OS saves its registers: the compiler's check).
bool CpuHasAvx512F();

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_CPU_FEATURES_H_
