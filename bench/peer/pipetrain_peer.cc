// pipetrain's side of the peer benchmark (bench/peer/peer_bench.py drives it): trains the peer
// model (pre-LN GPT, tanh GELU, fused QKV, causal attention, untied head, byte vocabulary) with
// the pipeline runtime on the CPU backend, one thread per rank (one BLAS thread each) over the
// in-memory transport, and prints one JSON line: the fastest step of --steps after a warm-up
// step, the slowest rank's whole step (actions, gradient norm, AdamW update), and the process's
// CPU seconds (user + system, all threads) per step over the whole run, set-up and warm-up step
// included: on a loaded box the CPU time is the steadier figure.
//   pipetrain_peer --hidden 256 --layers 8 --schedule 1f1b --ranks 1     (single process)
//   pipetrain_peer --hidden 256 --layers 8 --schedule zb-v --ranks 2
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "bench/suite/cpu_run.h"

int main(int argc, char** argv) {
  CLI::App app("pipetrain side of the PyTorch peer benchmark");
  int hidden = 256, layers = 8, heads = 8, seq_len = 128, microbatch_size = 8, microbatches = 8;
  int ranks = 1, steps = 3;
  std::string schedule = "1f1b", gemm = "per-shape";
  app.add_option("--hidden", hidden, "model width (ffn = 4 x hidden)");
  app.add_option("--layers", layers, "transformer blocks");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--seq-len", seq_len, "tokens per sequence");
  app.add_option("--microbatch-size", microbatch_size, "sequences per microbatch");
  app.add_option("--microbatches", microbatches, "microbatches per step");
  app.add_option("--ranks", ranks, "pipeline ranks (threads); 1 = single process");
  app.add_option("--schedule", schedule, "schedule generator name (1f1b, interleaved-1f1b, zb-v, dualpipev)");
  app.add_option("--steps", steps, "measured steps after one warm-up step");
  app.add_option("--gemm", gemm, "which BLAS runs the GEMMs (kernels/cpu/gemm_router.h)")
      ->check(CLI::IsMember({"per-shape", "openblas", "onednn"}));
  CLI11_PARSE(app, argc, argv);

  pipetrain::bench::CpuJob job;
  job.model = {.num_layers = layers,
               .hidden = hidden,
               .heads = heads,
               .ffn = 4 * hidden,
               .seq_len = seq_len,
               .vocab = 256};
  job.microbatch_size = microbatch_size;
  job.microbatches = microbatches;
  job.gemm_routing = gemm == "openblas" ? pipetrain::kernels::GemmRouting::kOpenBlasOnly
                     : gemm == "onednn" ? pipetrain::kernels::GemmRouting::kOneDnnOnly
                                        : pipetrain::kernels::GemmRouting::kPerShape;
  pipetrain::model::OptimizerSettings optimizer;
  optimizer.adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
  pipetrain::bench::CpuRun run;
  run.name = schedule;
  if (absl::Status s = pipetrain::bench::RunCpuSchedule(job, ranks, steps, optimizer, &run);
      !s.ok()) {
    std::fprintf(stderr, "pipetrain_peer: %s\n", s.ToString().c_str());
    return 1;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  std::printf("{\"step_s\": %.6f, \"cpu_s_per_step\": %.6f, \"loss\": %.6f}\n",
              run.measured.front(), cpu / (steps + 1), run.losses.empty() ? 0.0 : run.losses.back());
  return 0;
}
