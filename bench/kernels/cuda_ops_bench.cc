// Where a GPU step's time goes: every backend op one training step of a GPT calls, timed alone
// on the CUDA backend at the job's shapes, then multiplied by how often a step calls it (one rank
// holding the whole model; a pipeline rank calls the same ops on its share). The sum is what the
// step would take with no gaps between ops; set beside a measured step time it says whether the
// time is in the kernels (and which) or around them (synchronisation, host work, transfers).
//
//   cuda_ops_bench [--layers 24 --hidden 1024 --heads 16 --seq 1024 --micro 4
//                   --microbatches 8 --vocab 50304 --precision bf16]
//
// Each op runs twice to warm up, then --reps times with a wait for the device after each; the
// fastest run counts (these machines are shared). Inputs are constant-filled: none of the timed
// kernels does data-dependent work. Needs a CUDA device (exits 1 with the reason otherwise);
// --device cpu runs the same list on the CPU backend (small shapes: a check of the bench itself).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace pipetrain::kernels {
namespace {

struct Shapes {
  int64_t layers = 24, hidden = 1024, heads = 16, seq = 1024, micro = 4, microbatches = 8;
  int64_t vocab = 50304;
  bool bf16 = true;
  bool cpu = false;
  int reps = 5;
};

struct Op {
  std::string name;
  int64_t per_step;  // calls per training step
  double flops;      // per call; 0 when not a matrix product
  std::function<absl::Status()> run;
};

absl::StatusOr<double> BestSeconds(Backend& be, const Op& op, int reps) {
  double best = 1e30;
  for (int i = 0; i < reps + 2; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = op.run(); !s.ok()) return s;
    if (absl::Status s = be.Synchronize(); !s.ok()) return s;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i >= 2) best = std::min(best, seconds);
  }
  return best;
}

absl::Status Run(const Shapes& s) {
  std::unique_ptr<Backend> backend;
  if (s.cpu) {
    CpuBackendOptions options;
    options.bf16_gemm = s.bf16;
    backend = std::make_unique<CpuBackend>(options);
  } else {
    cuda::CudaBackendOptions options;
    options.bf16_gemm = s.bf16;
    auto created = cuda::CudaBackend::Create(options);
    if (!created.ok()) return created.status();
    backend = *std::move(created);
  }
  Backend& be = *backend;
  const int64_t N = s.micro * s.seq, H = s.hidden, F = 4 * s.hidden, V = s.vocab;
  const int64_t per_mb = s.microbatches, per_layer_mb = s.layers * s.microbatches;
  std::deque<Tensor> keep;  // every tensor lives until the end (a deque keeps their addresses)
  auto make = [&](Shape shape, float value) -> absl::StatusOr<Tensor*> {
    auto t = be.Empty(shape, "bench");
    if (!t.ok()) return t.status();
    if (absl::Status st = be.Fill(value, &*t); !st.ok()) return st;
    keep.push_back(*std::move(t));
    return &keep.back();
  };
  // Activations and weights of one block, one microbatch.
  Tensor *x, *ln, *mean, *rstd, *gamma, *beta, *qkv, *wqkv, *bqkv, *att, *wproj, *bh, *h, *g, *wfc,
      *bf, *wfc2, *dqkv, *dx, *dh, *dwqkv, *dwfc, *dwfc2, *dbqkv, *logits, *probs, *dlogits, *whead, *dwhead,
      *wte, *wpe, *dwte, *dwpe;
#define PT_MAKE(var, ...)                 \
  {                                       \
    auto made = make(__VA_ARGS__);        \
    if (!made.ok()) return made.status(); \
    var = *made;                          \
  }
  PT_MAKE(x, {N, H}, 0.01f);
  PT_MAKE(ln, {N, H}, 0.0f);
  PT_MAKE(mean, {N}, 0.0f);
  PT_MAKE(rstd, {N}, 1.0f);
  PT_MAKE(gamma, {H}, 1.0f);
  PT_MAKE(beta, {H}, 0.0f);
  PT_MAKE(qkv, {N, 3 * H}, 0.01f);
  PT_MAKE(wqkv, {H, 3 * H}, 0.01f);
  PT_MAKE(bqkv, {3 * H}, 0.0f);
  PT_MAKE(att, {N, H}, 0.0f);
  PT_MAKE(wproj, {H, H}, 0.01f);
  PT_MAKE(bh, {H}, 0.0f);
  PT_MAKE(h, {N, F}, 0.01f);
  PT_MAKE(g, {N, F}, 0.0f);
  PT_MAKE(wfc, {H, F}, 0.01f);
  PT_MAKE(bf, {F}, 0.0f);
  PT_MAKE(wfc2, {F, H}, 0.01f);
  PT_MAKE(dqkv, {N, 3 * H}, 0.0f);
  PT_MAKE(dx, {N, H}, 0.0f);
  PT_MAKE(dh, {N, F}, 0.0f);
  PT_MAKE(dwqkv, {H, 3 * H}, 0.0f);
  PT_MAKE(dwfc, {H, F}, 0.0f);
  PT_MAKE(dwfc2, {F, H}, 0.0f);
  PT_MAKE(dbqkv, {3 * H}, 0.0f);
  PT_MAKE(logits, {N, V}, 0.01f);
  PT_MAKE(probs, {N, V}, 0.0f);
  PT_MAKE(dlogits, {N, V}, 0.0f);
  PT_MAKE(whead, {H, V}, 0.01f);
  PT_MAKE(dwhead, {H, V}, 0.0f);
  PT_MAKE(wte, {V, H}, 0.01f);
  PT_MAKE(wpe, {s.seq, H}, 0.01f);
  PT_MAKE(dwte, {V, H}, 0.0f);
  PT_MAKE(dwpe, {s.seq, H}, 0.0f);
  // The optimizer's share: every parameter once a step, as one tensor (the step runs one call
  // per parameter tensor; the bytes moved are the same).
  const int64_t params = s.layers * (12 * H * H + 13 * H) + 2 * V * H + s.seq * H + 2 * H;
  Tensor *p, *pg, *pm, *pv;
  PT_MAKE(p, {params}, 0.01f);
  PT_MAKE(pg, {params}, 0.001f);
  PT_MAKE(pm, {params}, 0.0f);
  PT_MAKE(pv, {params}, 0.0f);
#undef PT_MAKE
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) ids[i] = static_cast<int32_t>((i * 7919) % V);
  AdamWConfig adamw{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
  const double gemm = 2.0 * N * H;  // flops of an [N,H] x [H,1] product column
  const double attention_f = 4.0 * s.micro * s.seq * s.seq * H;  // QK^T and PV
  std::vector<Op> ops = {
      {"LayerNorm F", 2 * per_layer_mb + per_mb, 0,
       [&] { return be.LayerNormForward(*x, *gamma, *beta, ln, mean, rstd); }},
      {"Linear qkv F", per_layer_mb, gemm * 3 * H,
       [&] { return be.Linear(*ln, *wqkv, *bqkv, nullptr, qkv); }},
      {"Attention F", per_layer_mb, attention_f,
       [&] { return be.AttentionForward(*qkv, s.micro, s.seq, s.heads, att); }},
      {"Linear proj F", per_layer_mb, gemm * H,
       [&] { return be.Linear(*att, *wproj, *bh, x, dx); }},
      {"Linear fc F", per_layer_mb, gemm * F,
       [&] { return be.Linear(*ln, *wfc, *bf, nullptr, h); }},
      {"GELU F", per_layer_mb, 0, [&] { return be.GeluForward(*h, g); }},
      {"Linear fc2 F", per_layer_mb, gemm * F, [&] { return be.Linear(*g, *wfc2, *bh, x, dx); }},
      {"Gemm fc2 B (dY W^T)", per_layer_mb, gemm * F,
       [&] { return be.Gemm(*dx, false, *wfc2, true, 1, 0, dh); }},
      {"GELU B", per_layer_mb, 0, [&] { return be.GeluBackward(*dh, *h, g); }},
      {"Gemm fc B", per_layer_mb, gemm * F,
       [&] { return be.Gemm(*dh, false, *wfc, true, 1, 0, dx); }},
      {"Gemm qkv B", per_layer_mb, gemm * 3 * H,
       [&] { return be.Gemm(*dqkv, false, *wqkv, true, 1, 0, dx); }},
      {"Gemm proj B", per_layer_mb, gemm * H,
       [&] { return be.Gemm(*dx, false, *wproj, true, 1, 0, att); }},
      {"LayerNorm B input", 2 * per_layer_mb + per_mb, 0,
       [&] { return be.LayerNormBackwardInput(*dx, *x, *gamma, *mean, *rstd, ln, x); }},
      {"Attention B", per_layer_mb, 2.5 * attention_f,
       [&] { return be.AttentionBackward(*att, *qkv, s.micro, s.seq, s.heads, dqkv); }},
      {"LayerNorm B weight", 2 * per_layer_mb + per_mb, 0,
       [&] { return be.LayerNormBackwardWeight(*dx, *x, *mean, *rstd, true, gamma, beta); }},
      {"Gemm W qkv (X^T dY)", per_layer_mb, gemm * 3 * H,
       [&] { return be.Gemm(*ln, true, *dqkv, false, 1, 1, dwqkv); }},
      {"Gemm W fc", per_layer_mb, gemm * F,
       [&] { return be.Gemm(*ln, true, *dh, false, 1, 1, dwfc); }},
      {"Gemm W fc2", per_layer_mb, gemm * F,
       [&] { return be.Gemm(*g, true, *dx, false, 1, 1, dwfc2); }},
      {"Gemm W proj", per_layer_mb, gemm * H,
       [&] { return be.Gemm(*att, true, *dx, false, 1, 1, wproj); }},
      {"BiasGrad (3H wide, for all four)", 4 * per_layer_mb, 0,
       [&] { return be.BiasGrad(*dqkv, true, dbqkv); }},
      {"Gemm head F", per_mb, gemm * V,
       [&] { return be.Gemm(*ln, false, *whead, false, 1, 0, logits); }},
      {"CrossEntropy F", per_mb, 0,
       [&]() -> absl::Status { return be.CrossEntropyForward(*logits, ids, probs).status(); }},
      {"CrossEntropy B", per_mb, 0,
       // Not in place: repeated in place, the gradient shrinks into denormals, which the CPU's
       // GEMMs then run a hundred times slower on.
       [&] { return be.CrossEntropyBackward(*probs, ids, 1.0f, dlogits); }},
      {"Gemm head B", per_mb, gemm * V,
       [&] { return be.Gemm(*dlogits, false, *whead, true, 1, 0, x); }},
      {"Gemm head W", per_mb, gemm * V,
       [&] { return be.Gemm(*ln, true, *dlogits, false, 1, 1, dwhead); }},
      {"Embedding F", per_mb, 0, [&] { return be.EmbeddingForward(ids, s.seq, *wte, *wpe, x); }},
      {"Embedding B", per_mb, 0,
       [&] { return be.EmbeddingBackward(ids, s.seq, *x, true, dwte, dwpe); }},
      {"SumOfSquares (all grads)", 1, 0,
       [&]() -> absl::Status { return be.SumOfSquares(*pg).status(); }},
      {"AllFinite (all grads)", 1, 0,
       [&]() -> absl::Status { return be.AllFinite({pg}).status(); }},
      {"AdamW (all params)", 1, 0, [&] { return be.AdamWUpdate(adamw, 1, *pg, p, pm, pv); }},
  };
  std::printf(
      "# %s ops at layers %lld, hidden %lld, heads %lld, seq %lld, micro %lld x %lld, "
      "vocab %lld, %s; %lld parameters\n",
      s.cpu ? "CPU" : "CUDA", static_cast<long long>(s.layers), static_cast<long long>(H),
      static_cast<long long>(s.heads), static_cast<long long>(s.seq),
      static_cast<long long>(s.micro), static_cast<long long>(s.microbatches),
      static_cast<long long>(V), s.bf16 ? "bf16" : "fp32", static_cast<long long>(params));
  std::printf(
      "| op | ms per call | calls per step | ms per step | TFLOP/s |\n|---|---|---|---|---|\n");
  double total = 0, total_flops = 0;
  for (const Op& op : ops) {
    auto seconds = BestSeconds(be, op, s.reps);
    if (!seconds.ok()) {
      return absl::Status(seconds.status().code(),
                          absl::StrCat(op.name, ": ", seconds.status().message()));
    }
    const double step_ms = *seconds * 1e3 * op.per_step;
    total += step_ms;
    total_flops += op.flops * op.per_step;
    const std::string tflops =
        op.flops > 0 ? absl::StrFormat("%.1f", op.flops / *seconds / 1e12) : std::string("");
    std::printf("| %s | %.3f | %lld | %.1f | %s |\n", op.name.c_str(), *seconds * 1e3,
                static_cast<long long>(op.per_step), step_ms, tflops.c_str());
  }
  std::printf("| **sum** | | | %.1f | %.1f |\n", total, total_flops / (total / 1e3) / 1e12);
  return absl::OkStatus();
}

}  // namespace
}  // namespace pipetrain::kernels

int main(int argc, char** argv) {
  pipetrain::kernels::Shapes s;
  std::string precision = "bf16";
  CLI::App app("Time each CUDA backend op of a GPT training step at the job's shapes");
  app.add_option("--layers", s.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--hidden", s.hidden, "hidden size")->check(CLI::PositiveNumber);
  app.add_option("--heads", s.heads, "attention heads (dividing hidden)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seq", s.seq, "tokens per sequence")->check(CLI::PositiveNumber);
  app.add_option("--micro", s.micro, "sequences per microbatch")->check(CLI::PositiveNumber);
  app.add_option("--microbatches", s.microbatches, "microbatches per step")
      ->check(CLI::PositiveNumber);
  app.add_option("--vocab", s.vocab, "vocabulary size")->check(CLI::PositiveNumber);
  app.add_option("--precision", precision, "bf16 or fp32 GEMM inputs")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  app.add_option("--reps", s.reps, "timed runs per op (the fastest counts)")
      ->check(CLI::PositiveNumber);
  std::string device = "cuda";
  app.add_option("--device", device, "cuda, or cpu (a check of the bench at small shapes)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  CLI11_PARSE(app, argc, argv);
  s.bf16 = precision == "bf16";
  s.cpu = device == "cpu";
  if (absl::Status st = pipetrain::kernels::Run(s); !st.ok()) {
    std::fprintf(stderr, "cuda_ops_bench: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}
