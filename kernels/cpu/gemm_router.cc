#include "kernels/cpu/gemm_router.h"

#include <cblas.h>
#include <dlfcn.h>

#include "glog/logging.h"
#include "oneapi/dnnl/dnnl.h"

namespace pipetrain::kernels {
namespace {

// oneDNN runs on OpenMP, whose thread count belongs to the calling thread: set it once per
// thread (and again if a backend asks for another count). The setter is looked up in the
// process, so it is the OpenMP runtime oneDNN itself loaded (Debian's is built with libgomp); our
// code is not compiled for OpenMP and links no runtime of its own.
void SetOneDnnThreads(int threads) {
  using SetNumThreads = void (*)(int);
  static const auto set_num_threads =
      reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  thread_local int current = 0;
  if (current != threads && set_num_threads != nullptr) {
    set_num_threads(threads);
    current = threads;
  }
}

}  // namespace

void GemmRouter::Run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                     float* c, int64_t ldc) const {
  GemmLibrary library = GemmLibrary::kOpenBlas;
  switch (routing) {
    case GemmRouting::kPerShape:
      library = ChooseGemmLibrary({trans_a, trans_b, m, n, k, beta != 0.0f}, openblas_narrower);
      break;
    case GemmRouting::kOpenBlasOnly:
      break;
    case GemmRouting::kOneDnnOnly:
      library = GemmLibrary::kOneDnn;
      break;
  }
  if (library == GemmLibrary::kOneDnn) {
    SetOneDnnThreads(threads);
    const dnnl_status_t s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a,
                                       lda, b, ldb, beta, c, ldc);
    CHECK_EQ(s, dnnl_success) << "dnnl_sgemm " << m << "x" << n << "x" << k;
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

}  // namespace pipetrain::kernels
