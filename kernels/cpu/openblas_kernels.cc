#include "kernels/cpu/openblas_kernels.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>

#include "kernels/cpu/cpu_features.h"

namespace pipetrain::kernels {
namespace {

bool CpuHasAvx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

// Runs when the program loads, after OpenBLAS's own initialisation (a library this one links)
// and before main, so no thread can be reading the environment while it is changed. It uses
// the DYNAMIC_ARCH build's own entry points (gotoblas_dynamic_quit / _init, which re-read
// OPENBLAS_CORETYPE); an OpenBLAS without them is left as it is.
__attribute__((constructor)) void CorrectOpenBlasKernels() {
  const std::string target =
      OpenBlasCoreCorrection(OpenBlasCoreName(), CpuHasAvx2Fma(), CpuHasAvx512(),
                             std::getenv("OPENBLAS_CORETYPE") != nullptr);
  if (target.empty()) return;
  auto quit = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return;
  setenv("OPENBLAS_CORETYPE", target.c_str(), 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace

std::string OpenBlasCoreName() {
  const char* name = openblas_get_corename();
  return name == nullptr ? "" : name;
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

}  // namespace pipetrain::kernels
