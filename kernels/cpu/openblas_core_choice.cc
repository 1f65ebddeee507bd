#include "kernels/cpu/openblas_core_choice.h"

namespace pipetrain::kernels {

bool CpuHasAvx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

std::string OpenBlasCoreCorrection(const std::string& core, bool avx2_fma, bool avx512,
                                   bool user_set_coretype) {
  if (user_set_coretype || !avx2_fma) return "";
  // OpenBLAS's x86-64 kernel sets without AVX2 (its generic fallbacks and older cores).
  static const char* const kPreAvx2[] = {"Prescott", "Core2",   "Penryn", "Dunnington",
                                         "Nehalem",  "Atom",    "Katmai", "Coppermine",
                                         "Northwood", "Banias", "Sandybridge", "Opteron",
                                         "Opteron(SSE3)", "Barcelona", "Bobcat", "Bulldozer",
                                         "Piledriver", "Steamroller", "Excavator", "Nano"};
  for (const char* old : kPreAvx2) {
    if (core == old) return avx512 ? "SkylakeX" : "Haswell";
  }
  return "";
}

bool OpenBlasCoreUsesAvx512(const std::string& core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

}  // namespace pipetrain::kernels
