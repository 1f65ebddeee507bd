#include "kernels/cpu/cpu_features.h"

namespace pipetrain::kernels {

bool CpuHasAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx512F() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = CpuHasAvx2Fma() && __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

}  // namespace pipetrain::kernels
