// blas_compare: the best single-thread sgemm of each candidate BLAS on the GEMM shapes the chunks
// run (issue 26), each library loaded with dlopen (RTLD_LOCAL | RTLD_DEEPBIND) so several can be
// compared in one process; GFLOP/s as a fraction of the core's measured FMA peak. Libraries are
// given as NAME=PATH[:CORETYPE]; CORETYPE sets OPENBLAS_CORETYPE for that OpenBLAS before it
// loads (OpenBLAS picks its kernels when it is loaded); without it an OpenBLAS gets the kernel
// set pipetrain gives it (openblas_core_choice.h). Without --lib: every Debian BLAS installed
// (OpenBLAS pthread/openmp/serial, BLIS pthread/openmp/serial, oneDNN), looked for first under
// --root DIR (Debian packages unpacked there with dpkg-deb -x, not installed: scripts/bench.sh
// does that) and then in the system's library directory. A name starting with "dnnl" is called
// through dnnl_sgemm, anything else through cblas_sgemm.
//   blas_compare --lib openblas=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 \
//                --lib openblas-haswell=/usr/lib/x86_64-linux-gnu/libopenblas.so.0:Haswell
// Prints a Markdown table (rows: shapes; columns: libraries).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/kernels/fma_peak.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/openblas_core_choice.h"

namespace {

enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);

struct Lib {
  std::string name;
  CblasSgemm cblas = nullptr;
  DnnlSgemm dnnl = nullptr;
  void Gemm(bool ta, bool tb, int m, int n, int k, float beta, const float* a, const float* b,
            float* c) const {
    const int lda = ta ? m : k, ldb = tb ? k : n;
    if (dnnl != nullptr) {
      dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, n);
    } else {
      cblas(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, m, n, k, 1.0f, a, lda, b,
            ldb, beta, c, n);
    }
  }
};

struct Shape {
  const char* what;
  bool ta, tb;
  int m, n, k;
  float beta;
};

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Best GFLOP/s over `repeats` timings of at least 0.2 s each (the box is shared: load only adds
// time).
double Measure(const Lib& lib, const Shape& s, int repeats) {
  std::vector<float> a(static_cast<size_t>(s.m) * s.k, 0.5f), b(static_cast<size_t>(s.k) * s.n,
                                                               0.25f),
      c(static_cast<size_t>(s.m) * s.n, 0.0f);
  lib.Gemm(s.ta, s.tb, s.m, s.n, s.k, s.beta, a.data(), b.data(), c.data());
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    int iters = 0;
    const double t0 = Seconds();
    double t1 = t0;
    while (t1 - t0 < 0.2) {
      lib.Gemm(s.ta, s.tb, s.m, s.n, s.k, s.beta, a.data(), b.data(), c.data());
      ++iters;
      t1 = Seconds();
    }
    best = std::max(best, 2.0 * s.m * s.n * s.k * iters / (t1 - t0) * 1e-9);
  }
  return best;
}

}  // namespace

// Loads one library; false (with a note on stderr) when it cannot be used.
bool Load(const std::string& name, std::string path, std::vector<Lib>* libs) {
  Lib lib;
  lib.name = name;
  const bool forced = path.find(':') != std::string::npos;
  if (forced) {
    setenv("OPENBLAS_CORETYPE", path.substr(path.find(':') + 1).c_str(), 1);
    path = path.substr(0, path.find(':'));
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  unsetenv("OPENBLAS_CORETYPE");
  if (h == nullptr) {
    std::fprintf(stderr, "blas_compare: %s: %s (skipped)\n", name.c_str(), dlerror());
    return false;
  }
  // One thread everywhere (each library's own switch, where it has one).
  if (auto f = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) f(1);
  if (auto f = reinterpret_cast<void (*)(int64_t)>(dlsym(h, "bli_thread_set_num_threads"))) f(1);
  if (name.rfind("dnnl", 0) == 0) {
    lib.dnnl = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm"));
  } else {
    lib.cblas = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
  }
  if (lib.cblas == nullptr && lib.dnnl == nullptr) {
    std::fprintf(stderr, "blas_compare: %s has no sgemm (skipped)\n", name.c_str());
    return false;
  }
  if (auto corename = reinterpret_cast<const char* (*)()>(dlsym(h, "openblas_get_corename"))) {
    const std::string detected = corename();
    const std::string target = pipetrain::kernels::OpenBlasCoreCorrection(
        detected, pipetrain::kernels::CpuHasAvx2Fma(), pipetrain::kernels::CpuHasAvx512(),
        forced);
    auto quit = reinterpret_cast<void (*)()>(dlsym(h, "gotoblas_dynamic_quit"));
    auto init = reinterpret_cast<void (*)()>(dlsym(h, "gotoblas_dynamic_init"));
    if (!target.empty() && quit != nullptr && init != nullptr) {
      setenv("OPENBLAS_CORETYPE", target.c_str(), 1);
      quit();
      init();
      unsetenv("OPENBLAS_CORETYPE");
    }
    lib.name += " (" + (target.empty() || detected == corename() ? std::string()
                                                                  : detected + " -> ") +
                corename() + ")";
  }
  libs->push_back(lib);
  return true;
}

int main(int argc, char** argv) {
  // One thread for the libraries threaded through OpenMP (oneDNN, the openmp builds), whose
  // runtime reads this once, when the first of them loads; the others are set after loading.
  setenv("OMP_NUM_THREADS", "1", 1);
  std::vector<Lib> libs;
  int repeats = 3;
  bool given = false;
  std::string root;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
      continue;
    }
    if (arg == "--root" && i + 1 < argc) {
      root = argv[++i];
      continue;
    }
    if (arg != "--lib" || i + 1 >= argc) {
      std::fprintf(stderr,
                   "usage: blas_compare [--repeats N] [--root DIR] [--lib NAME=PATH[:CORETYPE] "
                   "...]\n");
      return 2;
    }
    const std::string spec = argv[++i];
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "blas_compare: --lib wants NAME=PATH[:CORETYPE], got %s\n",
                   spec.c_str());
      return 2;
    }
    Load(spec.substr(0, eq), spec.substr(eq + 1), &libs);
    given = true;
  }
  if (!given) {
    const std::string system_dir = "/usr/lib/x86_64-linux-gnu/";
    // The first of root's and the system's copy of a library file; empty when neither has it.
    auto find = [&](const std::string& file) -> std::string {
      for (const std::string& dir : {root.empty() ? "" : root + system_dir, system_dir}) {
        if (!dir.empty() && access((dir + file).c_str(), R_OK) == 0) return dir + file;
      }
      return "";
    };
    for (const char* variant : {"pthread", "openmp", "serial"}) {
      const std::string v = variant;
      const std::string openblas = find("openblas-" + v + "/libopenblas.so.0");
      if (!openblas.empty()) Load("openblas-" + v, openblas, &libs);
      const std::string blis = find("blis-" + v + "/libblis.so.4");
      if (!blis.empty()) Load("blis-" + v, blis, &libs);
    }
    // oneDNN links libOpenCL; an unpacked copy must be loaded first, globally, to be found.
    const std::string opencl = find("libOpenCL.so.1");
    if (!opencl.empty()) dlopen(opencl.c_str(), RTLD_NOW | RTLD_GLOBAL);
    for (const char* name : {"libdnnl.so.3", "libdnnl.so.2"}) {
      const std::string dnnl = find(name);
      if (!dnnl.empty() && Load("dnnl", dnnl, &libs)) break;
    }
  }
  if (libs.empty()) {
    std::fprintf(stderr, "blas_compare: no BLAS library could be loaded\n");
    return 1;
  }
  // The core's peak: the widest FMA loop it runs, best of the repeats.
  double peak = 0;
  const bool wide = pipetrain::bench::CpuHasAvx512F();
  if (pipetrain::kernels::CpuHasAvx2Fma()) {
    for (int r = 0; r < repeats; ++r) {
      const int64_t iters = 1 << 22;
      const double t0 = Seconds();
      volatile float sink = wide ? pipetrain::bench::FmaPeakLoop512(iters)
                                 : pipetrain::bench::FmaPeakLoop(iters);
      (void)sink;
      peak = std::max(peak, (wide ? pipetrain::bench::kFmaPeak512FlopsPerIteration
                                  : pipetrain::bench::kFmaPeakFlopsPerIteration) *
                                iters / (Seconds() - t0) * 1e-9);
    }
  }
  // The chunk GEMMs at hidden 256 / ffn 1024 / 1024 tokens (the peer model), forward (X W),
  // input gradient (dY W^T) and accumulating weight gradient (dW += X^T dY), plus square 1024.
  const Shape shapes[] = {
      {"square 1024", false, false, 1024, 1024, 1024, 0},
      {"F qkv: X[1024,256] W[256,768]", false, false, 1024, 768, 256, 0},
      {"F fc: X[1024,256] W[256,1024]", false, false, 1024, 1024, 256, 0},
      {"F fc2: X[1024,1024] W[1024,256]", false, false, 1024, 256, 1024, 0},
      {"B qkv: dY[1024,768] W^T", false, true, 1024, 256, 768, 0},
      {"B fc2: dY[1024,256] W^T", false, true, 1024, 1024, 256, 0},
      {"W qkv: dW += X^T dY [256,768]", true, false, 256, 768, 1024, 1},
      {"W fc2: dW += X^T dY [1024,256]", true, false, 1024, 256, 1024, 1},
      {"attention scores: [32,128] x [128,32]^T", false, true, 32, 128, 32, 0},
  };
  std::printf("%s FMA peak (measured): %.1f GFLOP/s\n\n| shape |", wide ? "AVX-512" : "AVX2",
              peak);
  for (const Lib& l : libs) std::printf(" %s |", l.name.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < libs.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Shape& s : shapes) {
    std::printf("| %s |", s.what);
    for (const Lib& l : libs) {
      const double g = Measure(l, s, repeats);
      std::printf(" %.1f (%.0f%%) |", g, peak > 0 ? 100 * g / peak : 0.0);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}
