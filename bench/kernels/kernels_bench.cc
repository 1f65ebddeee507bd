// Compute benchmarks (issues 4 and 26): the core's measured fp32 FMA peak and the single-thread
// OpenBLAS sgemm rate as yardsticks, per-op throughput of the CPU backend (elementwise and
// attention ops with both VectorKernels tables, side by side), and per-chunk F / B / W
// throughput of GPT chunks at hidden 256 and 512. GFLOP/s counters use analytic FLOPs (GEMM
// FLOPs only for chunks, see cost_model.h) and wall time (UseRealTime). OpenBLAS runs with 1
// thread.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "bench/kernels/fma_peak.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_features.h"
#include "model/cost_model.h"
#include "worker/model/gpt_chunk.h"
#include "worker/model/parameter.h"

namespace pipetrain {
namespace {

using kernels::CpuBackend;
using kernels::Tensor;

CpuBackend& Backend() {
  static CpuBackend* backend = new CpuBackend({.blas_threads = 1});
  return *backend;
}

// The same backend with the portable loops (the arithmetic before issue 26), for side-by-side
// per-op figures: range(0) == 1 selects it in the op benchmarks below.
CpuBackend& PortableBackend() {
  static CpuBackend* backend = new CpuBackend({.blas_threads = 1, .portable_kernels = true});
  return *backend;
}

// Every GEMM on OpenBLAS (no per-shape oneDNN choice, kernels/cpu/gemm_choice.h), for the
// chunk figures side by side with the default routing.
CpuBackend& OpenBlasBackend() {
  static CpuBackend* backend = new CpuBackend(
      {.blas_threads = 1, .gemm_routing = kernels::GemmRouting::kOpenBlasOnly});
  return *backend;
}

CpuBackend& OpBackend(benchmark::State& state) {
  CpuBackend& be = state.range(0) == 1 ? PortableBackend() : Backend();
  state.SetLabel(std::string(be.vector_kernels_name()));
  return be;
}

Tensor Random(const kernels::Shape& shape, uint64_t seed) {
  return *Backend().FromHost(
      shape, model::NormalValues(seed, 0, "bench", kernels::NumElements(shape), 1.0f), "bench");
}

void SetFlops(benchmark::State& state, double flops) {
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The core's fp32 peak: independent FMAs, no memory (the physical limit). range(0): 256 = AVX2,
// 512 = AVX-512 (skipped on CPUs without it). Run first and again last (BM_FmaPeakAgain): these
// boxes are virtual machines whose second vCPU may be the same physical core, so a neighbour's
// work can halve a reading. The suite takes the highest reading as the peak and reports the
// lowest, so a run whose core was shared says so.
void FmaPeak(benchmark::State& state) {
  const bool wide = state.range(0) == 512;
  if (!kernels::CpuHasAvx2Fma() || (wide && !bench::CpuHasAvx512F())) {
    state.SkipWithError(wide ? "no AVX-512 on this CPU" : "no AVX2/FMA on this CPU");
    return;
  }
  const int64_t iterations = 1 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(wide ? bench::FmaPeakLoop512(iterations)
                                  : bench::FmaPeakLoop(iterations));
  }
  state.SetLabel(wide ? "AVX-512" : "AVX2");
  SetFlops(state, (wide ? bench::kFmaPeak512FlopsPerIteration : bench::kFmaPeakFlopsPerIteration) *
                      static_cast<double>(iterations));
}
void BM_FmaPeak(benchmark::State& state) { FmaPeak(state); }
BENCHMARK(BM_FmaPeak)->Arg(256)->Arg(512)->UseRealTime()->Unit(benchmark::kMillisecond);

// Square sgemm m = n = k: the reference rate.
void BM_Sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = Random({n, n}, 1), b = Random({n, n}, 2), c = Random({n, n}, 3);
  for (auto _ : state) {
    auto s = Backend().Gemm(a, false, b, false, 1, 0, &c);
    benchmark::DoNotOptimize(s);
  }
  SetFlops(state, 2.0 * n * n * n);
}
BENCHMARK(BM_Sgemm)->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

// Linear-layer GEMMs at N = 1024 tokens, H = 512, F = 2048: forward, input grad, weight grad.
void BM_LinearGemm(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int64_t n = 1024, in = 512, out = 2048;
  Tensor x = Random({n, in}, 1), w = Random({in, out}, 2), y = Random({n, out}, 3);
  Tensor dx = Random({n, in}, 4), dw = Random({in, out}, 5);
  for (auto _ : state) {
    absl::Status s;
    if (mode == 0) s = Backend().Gemm(x, false, w, false, 1, 0, &y);  // F: X W
    if (mode == 1) s = Backend().Gemm(y, false, w, true, 1, 0, &dx);  // B: dY W^T
    if (mode == 2) s = Backend().Gemm(x, true, y, false, 1, 1, &dw);  // W: dW += X^T dY
    benchmark::DoNotOptimize(s);
  }
  state.SetLabel(mode == 0 ? "F XW" : mode == 1 ? "B dYW^T" : "W X^TdY(acc)");
  SetFlops(state, 2.0 * n * in * out);
}
BENCHMARK(BM_LinearGemm)->DenseRange(0, 2)->UseRealTime()->Unit(benchmark::kMillisecond);

// range(0): 0 = best kernels, 1 = portable; range(1): 0 = F, 1 = B; range(2): hidden (T = 128,
// 8 sequences and 8 heads at hidden 256, the peer comparison's shape; T = 256, 4 sequences at 512).
void BM_Attention(benchmark::State& state) {
  CpuBackend& be = OpBackend(state);
  const bool backward = state.range(1) == 1;
  const int64_t h = state.range(2), nh = 8, t = h == 256 ? 128 : 256, b = h == 256 ? 8 : 4;
  Tensor qkv = Random({b * t, 3 * h}, 1);
  Tensor out = Random({b * t, h}, 3), dqkv = Random({b * t, 3 * h}, 4);
  CHECK((be.AttentionForward(qkv, b, t, nh, &out)).ok());
  for (auto _ : state) {
    absl::Status s = backward ? be.AttentionBackward(out, qkv, b, t, nh, &dqkv)
                              : be.AttentionForward(qkv, b, t, nh, &out);
    benchmark::DoNotOptimize(s);
  }
  state.SetLabel(std::string(backward ? "B " : "F ") + std::string(be.vector_kernels_name()));
  // Nominal FLOPs of the full (unmasked) products, as cost_model.h counts them (the backward's
  // include its recomputed scores).
  SetFlops(state, (backward ? 10.0 : 4.0) * b * t * t * h);
}
BENCHMARK(BM_Attention)
    ->ArgsProduct({{0, 1}, {0, 1}, {256, 512}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Elementwise / row-wise ops on [1024, 512] (GELU on [1024, 2048]); FLOPs are nominal
// (per-element operation counts) and only indicate relative cost.
void BM_LayerNorm(benchmark::State& state) {
  CpuBackend& be = OpBackend(state);
  Tensor x = Random({1024, 512}, 1), g = Random({512}, 2), b = Random({512}, 3);
  Tensor y = Random({1024, 512}, 4), mean = Random({1024}, 5), rstd = Random({1024}, 6);
  for (auto _ : state) {
    auto s = be.LayerNormForward(x, g, b, &y, &mean, &rstd);
    benchmark::DoNotOptimize(s);
  }
  SetFlops(state, 8.0 * 1024 * 512);
}
BENCHMARK(BM_LayerNorm)->DenseRange(0, 1)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Gelu(benchmark::State& state) {
  CpuBackend& be = OpBackend(state);
  Tensor x = Random({1024, 2048}, 1), y = Random({1024, 2048}, 2);
  for (auto _ : state) {
    auto s = be.GeluForward(x, &y);
    benchmark::DoNotOptimize(s);
  }
  SetFlops(state, 10.0 * 1024 * 2048);
}
BENCHMARK(BM_Gelu)->DenseRange(0, 1)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_CrossEntropy(benchmark::State& state) {
  CpuBackend& be = OpBackend(state);
  Tensor logits = Random({1024, 256}, 1), probs = Random({1024, 256}, 2);
  std::vector<int32_t> targets(1024, 7);
  for (auto _ : state) {
    auto r = be.CrossEntropyForward(logits, targets, &probs);
    benchmark::DoNotOptimize(r);
  }
  SetFlops(state, 5.0 * 1024 * 256);
}
BENCHMARK(BM_CrossEntropy)->DenseRange(0, 1)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The core's widest FMA peak, measured now (about 2 ms): GFLOP/s of wall time.
double FmaPeakNow() {
  const bool wide = bench::CpuHasAvx512F();
  const int64_t iterations = 1 << 20;
  const auto start = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(wide ? bench::FmaPeakLoop512(iterations)
                                : bench::FmaPeakLoop(iterations));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return (wide ? bench::kFmaPeak512FlopsPerIteration : bench::kFmaPeakFlopsPerIteration) *
         static_cast<double>(iterations) / seconds * 1e-9;
}

// One chunk of a GPT with 8 heads, ffn 4 x hidden, vocab 256, microbatches of 1024 tokens:
// range(2) = hidden 256 (seq_len 128, 8 sequences: the peer comparison's model) or 512 (seq_len
// 256, 4 sequences). range(0): 0 = middle chunk with 2 blocks, 1 = last chunk (1 block + head).
// range(1): 0 = F, 1 = B, 2 = W. paired: after every timed pass (outside the timing) the FMA
// peak is measured again, and the counters of_peak_best / of_peak_median give the pass's rate
// over the peak measured right after it, round by round: a neighbour that takes the shared
// physical core for a while slows both readings of a round, so the ratio stays the chunk's own.
void RunChunk(benchmark::State& state, CpuBackend& be, bool paired = false) {
  const int64_t hidden = state.range(2);
  model::GptConfig config{.num_layers = 4,
                          .hidden = static_cast<int>(hidden),
                          .heads = 8,
                          .ffn = static_cast<int>(4 * hidden),
                          .seq_len = hidden == 256 ? 128 : 256,
                          .vocab = 256};
  const model::ChunkSpec spec = state.range(0) == 0 ? model::ChunkSpec{1, 2, false, false}
                                                    : model::ChunkSpec{3, 1, false, true};
  const int pass = static_cast<int>(state.range(1));
  const int64_t mbs = 1024 / config.seq_len, n = mbs * config.seq_len;
  auto chunk = *model::GptChunk::Create(&be, config, spec);
  CHECK((chunk->ZeroGrad()).ok());
  const std::vector<float> input = model::NormalValues(9, 0, "input", n * config.hidden, 1.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 31) % config.vocab);
  auto forward = [&](int mb) {
    model::ForwardInput in;
    in.activation = *be.FromHost({n, config.hidden}, input, "input");
    if (spec.has_head) in.targets = targets;
    return *chunk->Forward(mb, std::move(in));
  };
  auto backward_input = [&](int mb) {
    Tensor dy;
    if (!spec.has_head) dy = *be.FromHost({n, config.hidden}, input, "dy");
    return *chunk->BackwardInput(mb, std::move(dy));
  };
  const model::ChunkCost cost = model::EstimateChunkCost(config, spec, mbs);
  const double flops = pass == 0   ? cost.forward_flops
                       : pass == 1 ? cost.backward_input_flops
                                   : cost.backward_weight_flops;
  using Clock = std::chrono::steady_clock;
  std::vector<double> ratios;
  int mb = 0;
  for (auto _ : state) {
    Clock::time_point start;
    if (pass == 0) {
      start = Clock::now();
      benchmark::DoNotOptimize(forward(mb));
    } else if (pass == 1) {
      state.PauseTiming();
      forward(mb);
      state.ResumeTiming();
      start = Clock::now();
      benchmark::DoNotOptimize(backward_input(mb));
    } else {
      state.PauseTiming();
      forward(mb);
      backward_input(mb);
      state.ResumeTiming();
      start = Clock::now();
      CHECK((chunk->BackwardWeight(mb)).ok());
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    state.PauseTiming();
    if (pass == 2) {
      ++mb;
    } else {
      chunk->Discard(mb);
    }
    if (paired) ratios.push_back(flops / seconds * 1e-9 / FmaPeakNow());
    state.ResumeTiming();
  }
  if (paired && !ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    state.counters["of_peak_best"] = ratios.back();
    state.counters["of_peak_median"] = ratios[ratios.size() / 2];
  }
  state.SetLabel(std::string(spec.has_head ? "1 block + head " : "2 blocks ") + (pass == 0 ? "F"
                                                                                 : pass == 1
                                                                                     ? "B"
                                                                                     : "W"));
  SetFlops(state, flops);
}
void BM_Chunk(benchmark::State& state) { RunChunk(state, Backend()); }
BENCHMARK(BM_Chunk)
    ->ArgsProduct({{0, 1}, {0, 1, 2}, {256, 512}})
    ->UseRealTime()
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond);

// The hidden-256 chunks again, each pass paired with a peak reading right after it (RunChunk).
void BM_ChunkPaired(benchmark::State& state) { RunChunk(state, Backend(), /*paired=*/true); }
BENCHMARK(BM_ChunkPaired)
    ->ArgsProduct({{0, 1}, {0, 1, 2}, {256}})
    ->UseRealTime()
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond);

// The same chunks at hidden 256 with every GEMM on OpenBLAS: what the per-shape choice gains.
void BM_ChunkOpenBlasOnly(benchmark::State& state) { RunChunk(state, OpenBlasBackend()); }
BENCHMARK(BM_ChunkOpenBlasOnly)
    ->ArgsProduct({{0, 1}, {0, 1, 2}, {256}})
    ->UseRealTime()
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond);

// The peak again, after everything else (registration order is run order).
void BM_FmaPeakAgain(benchmark::State& state) { FmaPeak(state); }
BENCHMARK(BM_FmaPeakAgain)->Arg(256)->Arg(512)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipetrain

BENCHMARK_MAIN();
