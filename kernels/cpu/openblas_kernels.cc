#include "kernels/cpu/openblas_kernels.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/openblas_core_choice.h"

namespace pipetrain::kernels {
namespace {

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

}  // namespace pipetrain::kernels
