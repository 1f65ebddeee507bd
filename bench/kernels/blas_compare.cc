// blas_compare: the best single-thread sgemm of each candidate BLAS on the GEMM shapes the chunks
// run (issue 26), each library loaded with dlopen (RTLD_LOCAL | RTLD_DEEPBIND) so several can be
// compared in one process; GFLOP/s as a fraction of the core's measured FMA peak. Libraries are
// given as NAME=PATH[:CORETYPE]; CORETYPE sets OPENBLAS_CORETYPE for that OpenBLAS before it
// loads (OpenBLAS picks its kernels when it is loaded); without it an OpenBLAS gets the kernel
// set pipetrain gives it (openblas_core_choice.h). Without --lib: every Debian BLAS installed
// (OpenBLAS pthread/openmp/serial, BLIS pthread/openmp/serial, oneDNN), looked for first under
// --root DIR (Debian packages unpacked there with dpkg-deb -x, not installed: scripts/bench.sh
// does that) and then in the system's library directory. A name starting with "dnnl" is called
// through dnnl_sgemm, anything else through cblas_sgemm. --hidden H (repeatable, default 256)
// picks the model widths whose chunk shapes are measured.
//   blas_compare --hidden 64 --lib openblas=/usr/lib/x86_64-linux-gnu/libopenblas.so.0
//   blas_compare --lib haswell=/usr/lib/x86_64-linux-gnu/libopenblas.so.0:Haswell
// Prints a Markdown table (rows: shapes; columns: libraries, then the library pipetrain's
// CPU backend runs the shape on, kernels/cpu/gemm_choice.h).
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
#include "kernels/cpu/gemm_choice.h"
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
  std::string what;
  bool ta, tb;
  int m, n, k;
  float beta;
};

// The GEMMs a chunk of the peer model runs at hidden h (ffn 4h, 8 heads, 8 sequences of 128
// tokens, byte vocabulary): each linear layer's forward X W, input gradient dY W^T and
// accumulating weight gradient dW += X^T dY, and the attention's per-head block products
// (32-row query blocks against the whole sequence, head dim h / 8; kernels/cpu/cpu_attention.cc).
void AppendChunkShapes(int h, std::vector<Shape>* shapes) {
  const int tokens = 1024, t = 128, hd = h / 8;
  struct Layer {
    const char* name;
    int in, out;
  };
  const Layer layers[] = {{"qkv", h, 3 * h}, {"proj", h, h}, {"fc", h, 4 * h}, {"fc2", 4 * h, h},
                          {"head", h, 256}};
  const std::string at = " h" + std::to_string(h);
  for (const Layer& l : layers) {
    shapes->push_back({"F " + std::string(l.name) + at, false, false, tokens, l.out, l.in, 0});
    shapes->push_back({"B " + std::string(l.name) + at, false, true, tokens, l.in, l.out, 0});
    shapes->push_back({"W " + std::string(l.name) + at, true, false, l.in, l.out, tokens, 1});
  }
  shapes->push_back({"attn S=QK^T" + at, false, true, 32, t, hd, 0});
  shapes->push_back({"attn O=PV" + at, false, false, 32, hd, t, 0});
  shapes->push_back({"attn dK=dS^T Q" + at, true, false, 32, hd, t, 0});
}

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Best GFLOP/s of each library on one shape. The libraries take turns, `repeats` x 10 rounds of
// about 20 ms each, and each keeps its fastest round: on a shared box load only adds time, and
// taking turns exposes every library to the same load.
std::vector<double> Measure(const std::vector<Lib>& libs, const Shape& s, int repeats) {
  std::vector<float> a(static_cast<size_t>(s.m) * s.k, 0.5f), b(static_cast<size_t>(s.k) * s.n,
                                                               0.25f),
      c(static_cast<size_t>(s.m) * s.n, 0.0f);
  std::vector<double> best(libs.size(), 0.0);
  for (const Lib& lib : libs) lib.Gemm(s.ta, s.tb, s.m, s.n, s.k, s.beta, a.data(), b.data(), c.data());
  for (int r = 0; r < 10 * repeats; ++r) {
    for (size_t i = 0; i < libs.size(); ++i) {
      int iters = 0;
      const double t0 = Seconds();
      double t1 = t0;
      while (t1 - t0 < 0.02) {
        libs[i].Gemm(s.ta, s.tb, s.m, s.n, s.k, s.beta, a.data(), b.data(), c.data());
        ++iters;
        t1 = Seconds();
      }
      best[i] = std::max(best[i], 2.0 * s.m * s.n * s.k * iters / (t1 - t0) * 1e-9);
    }
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
  // The kernel set the environment holds OpenBLAS to, if any, before Load changes it: pipetrain
  // runs every shape on oneDNN when that set is narrower than the core (gemm_choice.h).
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const bool openblas_narrower = coretype != nullptr && pipetrain::kernels::CpuHasAvx512() &&
                                 !pipetrain::kernels::OpenBlasCoreUsesAvx512(coretype);
  std::vector<Lib> libs;
  int repeats = 3;
  std::vector<int> hiddens;
  bool given = false;
  std::string root;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
      continue;
    }
    if (arg == "--hidden" && i + 1 < argc) {
      hiddens.push_back(std::atoi(argv[++i]));
      continue;
    }
    if (arg == "--root" && i + 1 < argc) {
      root = argv[++i];
      continue;
    }
    if (arg != "--lib" || i + 1 >= argc) {
      std::fprintf(stderr,
                   "usage: blas_compare [--repeats N] [--hidden H ...] [--root DIR] [--lib NAME=PATH[:CORETYPE] "
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
  if (hiddens.empty()) hiddens = {256};
  if (libs.empty()) {
    std::fprintf(stderr, "blas_compare: no BLAS library could be loaded\n");
    return 1;
  }
  // The core's peak: the widest FMA loop it runs, best of the repeats.
  double peak = 0;
  const bool wide = pipetrain::bench::CpuHasAvx512F();
  if (pipetrain::kernels::CpuHasAvx2Fma()) {
    for (int r = 0; r < 10 * repeats; ++r) {
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
  std::vector<Shape> shapes = {{"square 1024", false, false, 1024, 1024, 1024, 0}};
  for (int h : hiddens) AppendChunkShapes(h, &shapes);
  std::printf("%s FMA peak (measured): %.1f GFLOP/s\n\n| shape |", wide ? "AVX-512" : "AVX2",
              peak);
  for (const Lib& l : libs) std::printf(" %s |", l.name.c_str());
  std::printf(" pipetrain runs |\n|---|");
  for (size_t i = 0; i <= libs.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Shape& s : shapes) {
    std::printf("| %s |", s.what.c_str());
    for (double g : Measure(libs, s, repeats)) {
      std::printf(" %.1f (%.0f%%) |", g, peak > 0 ? 100 * g / peak : 0.0);
      std::fflush(stdout);
    }
    const pipetrain::kernels::GemmLibrary choice = pipetrain::kernels::ChooseGemmLibrary(
        {s.ta, s.tb, s.m, s.n, s.k, s.beta != 0.0f}, openblas_narrower);
    std::printf(" %s |\n", choice == pipetrain::kernels::GemmLibrary::kOneDnn ? "oneDNN" : "OpenBLAS");
  }
  return 0;
}
