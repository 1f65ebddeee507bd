// Every schedule side by side with real CPU compute at p = 2 (one worker thread per core): a
// small GPT trained by ModelStageRunner on each worker, over the in-memory transport. The
// simulator is fed the per-stage F/B/W/BW times measured in the same run of the same schedule,
// so the comparison checks the schedule's dependencies and overlap, not the FLOP rate; memory is
// predicted from the model's exact stash bytes (the run itself: cpu_run.h).
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite/cpu_run.h"
#include "bench/suite/suite.h"

namespace pipetrain::bench {
namespace {

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

Section CpuComparison(const SuiteOptions& options) {
  const Stamp start = Now();
  CpuJob job;
  if (options.quick) {
    job.model = {.num_layers = 4, .hidden = 32, .heads = 4, .ffn = 64, .seq_len = 8, .vocab = 24};
    job.microbatch_size = 2;
    job.microbatches = 4;
  } else {
    job.model = {.num_layers = 8, .hidden = 64, .heads = 4, .ffn = 256, .seq_len = 64,
                 .vocab = 256};
    job.microbatch_size = 4;
    job.microbatches = 8;
  }
  const int p = 2;
  const int steps = options.quick ? 1 : 2;
  const int repeats = options.quick ? 1 : std::max(3, options.repeats);
  std::vector<CpuRun> runs;
  for (const std::string& name : schedule::GeneratorNames()) {
    CpuRun run;
    run.name = name;
    runs.push_back(run);
  }
  for (int rep = 0; rep < repeats; ++rep) {
    for (CpuRun& run : runs) {
      if (!run.error.empty()) continue;
      const std::vector<double> before = run.losses;
      run.losses.clear();
      model::OptimizerSettings optimizer;
      optimizer.adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
      if (absl::Status s = RunCpuSchedule(job, p, steps, optimizer, &run); !s.ok()) {
        run.error = std::string(s.message());
      }
      if (rep > 0 && !SameBits(before, run.losses)) run.error = "losses differ between runs";
    }
  }
  const Stamp end = Now();
  const CpuRun* base = nullptr;
  const CpuRun* reference = nullptr;
  for (const CpuRun& r : runs) {
    if (r.error.empty() && r.name == "1f1b") base = &r;
    if (r.error.empty() && reference == nullptr) reference = &r;
  }
  std::string md = absl::StrCat(
      "## Every schedule side by side: real CPU compute, p = 2\n\n", Provenance(options, start, end),
      "A GPT with ", job.model.num_layers, " blocks, hidden ", job.model.hidden, ", ",
      job.model.heads, " heads, ffn ", job.model.ffn, ", seq_len ", job.model.seq_len,
      ", vocab ", job.model.vocab, "; ", job.microbatches, " microbatches of ",
      job.microbatch_size,
      " sequences per step; 2 workers, each a thread with its own CPU backend (OpenBLAS 1 "
      "thread), so one worker per core. Measured: the fastest of ",
      steps, " steps after a warm-up step (load only adds time), the table run ", repeats,
      " time(s). Simulated: the schedule simulated with the per-stage F/B/W/BW times measured in "
      "the same run (means over the measured steps) and no transfer cost, so the gap is what the "
      "simulator does not model (transfers, contention between the two workers, the other "
      "engineers' load). Step bubble: 1 - all compute / (workers x step); per-stage bubble: 1 - "
      "the busiest worker's compute / the longest worker's own span (the papers' number). "
      "Memory: the model's exact stash bytes; the measured peak is the "
      "runner's allocator. Losses: every schedule's per-step losses compared bitwise with ",
      reference ? reference->name : "-", "'s.\n\n",
      "| schedule | simulated step ms | measured ms");
  for (int rep = 1; rep < repeats; ++rep) absl::StrAppend(&md, " | run ", rep + 1);
  md += " | measured / simulated | step bubble simulated | measured | per-stage bubble simulated | "
        "measured | peak MiB predicted | measured | "
        "throughput vs 1F1B (best runs; each run) | losses bitwise equal |\n|---|---|---|";
  for (int rep = 1; rep < repeats; ++rep) md += "---|";
  md += "---|---|---|---|---|---|---|---|---|\n";
  for (const CpuRun& r : runs) {
    if (!r.error.empty()) {
      absl::StrAppend(&md, "| ", r.name, " | not run: ", r.error, " |\n");
      continue;
    }
    absl::StrAppend(&md, "| ", r.name, " | ", Ms(r.simulated));
    for (double s : r.measured) absl::StrAppend(&md, " | ", Ms(s));
    std::string tput = "-";
    if (base != nullptr) {
      const double best_base = *std::min_element(base->measured.begin(), base->measured.end());
      const double best = *std::min_element(r.measured.begin(), r.measured.end());
      tput = absl::StrCat("**", Fixed(best_base / best, 3), "**");
      if (repeats > 1) {
        tput += " (";
        for (size_t i = 0; i < r.measured.size(); ++i) {
          absl::StrAppend(&tput, i ? "; " : "", Fixed(base->measured[i] / r.measured[i], 3));
        }
        tput += ")";
      }
    }
    absl::StrAppend(&md, " | ", Fixed(r.measured.back() / r.simulated, 3), " | ",
                    Fixed(r.sim_step_bubble, 3), " | ", Fixed(r.measured_step_bubble, 3), " | ",
                    Fixed(r.sim_bubble, 3), " | ", Fixed(r.measured_bubble, 3), " | ",
                    Fixed(r.sim_peak / (1 << 20), 2), " | ", Fixed(r.measured_peak / (1 << 20), 2), " | ",
                    tput, " | ", SameBits(r.losses, reference->losses) ? "yes" : "**no**",
                    " |\n");
  }
  // Noise: how far a schedule's throughput ratio moved between the runs.
  if (repeats > 1 && base != nullptr) {
    double spread = 0;
    for (const CpuRun& r : runs) {
      if (!r.error.empty()) continue;
      double lo = 1e30, hi = 0;
      for (size_t i = 0; i < r.measured.size(); ++i) {
        const double ratio = base->measured[i] / r.measured[i];
        lo = std::min(lo, ratio);
        hi = std::max(hi, ratio);
      }
      spread = std::max(spread, hi - lo);
    }
    absl::StrAppend(&md, "\nNoise: over the ", repeats,
                    " runs a schedule's measured throughput ratio moved by up to ",
                    Fixed(spread, 3),
                    " (max - min): two threads on a shared 2-core box; ratios closer than that "
                    "are not resolved here.\n");
  }
  md += "\n";
  Section section;
  section.markdown = md;
  return section;
}

}  // namespace pipetrain::bench
