// Gradient clipping's price in the pipeline: V-ZB and ZB-H1 (and 1F1B for scale) with real CPU
// compute at p = 2, clipping off against clipping on, side by side in one run. With optimizer
// post-validation (docs/training.md) no rank waits for the global norm before updating, so the
// bubble should stay where it is; a clipped step costs the ranks other than stage 0's a
// rollback (or a deferred update) at the start of the next step, which this measures too.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/suite/cpu_run.h"
#include "bench/suite/suite.h"

namespace pipetrain::bench {
namespace {

struct ClipCase {
  std::string label;
  double threshold = 0;  // clip_grad_norm; 0 = off
  CpuRun run;
};

model::OptimizerSettings Optimizer(double clip) {
  model::OptimizerSettings o;
  o.adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  o.clip_grad_norm = clip;
  return o;
}

}  // namespace

Section ClippingComparison(const SuiteOptions& options) {
  const Stamp start = Now();
  CpuJob job;
  if (options.quick) {
    job.model = {.num_layers = 4, .hidden = 32, .heads = 4, .ffn = 64, .seq_len = 8, .vocab = 24};
    job.microbatch_size = 2;
    job.microbatches = 4;
  } else {
    job.model = {
        .num_layers = 8, .hidden = 64, .heads = 4, .ffn = 256, .seq_len = 64, .vocab = 256};
    job.microbatch_size = 4;
    job.microbatches = 8;
  }
  const int p = 2;
  const int steps = options.quick ? 2 : 4;
  const int repeats = options.quick ? 1 : std::max(3, options.repeats);
  std::string rows;
  for (const std::string name : {"v-zb", "zb-h1", "1f1b"}) {
    // The norms of unclipped training pick the thresholds: under every step's norm (every step
    // clipped) and at their median (some clipped, some not).
    CpuRun probe;
    probe.name = name;
    if (absl::Status s = RunCpuSchedule(job, p, steps, Optimizer(0), &probe); !s.ok()) {
      absl::StrAppend(&rows, "| ", name, " | not run: ", s.message(), " |\n");
      continue;
    }
    std::vector<double> norms = probe.grad_norms;
    std::sort(norms.begin(), norms.end());
    std::vector<ClipCase> cases = {{"off", 0, {}},
                                   {"on, every step clipped", norms.front() / 2, {}},
                                   {"on, about half clipped", norms[norms.size() / 2], {}}};
    for (int rep = 0; rep < repeats; ++rep) {
      for (ClipCase& c : cases) {
        c.run.name = name;
        if (!c.run.error.empty()) continue;
        if (absl::Status s = RunCpuSchedule(job, p, steps, Optimizer(c.threshold), &c.run);
            !s.ok()) {
          c.run.error = std::string(s.message());
        }
      }
    }
    const CpuRun& off = cases.front().run;
    for (const ClipCase& c : cases) {
      const CpuRun& r = c.run;
      if (!r.error.empty()) {
        absl::StrAppend(&rows, "| ", name, " | ", c.label, " | not run: ", r.error, " |\n");
        continue;
      }
      const double best = *std::min_element(r.measured.begin(), r.measured.end());
      const double best_off =
          off.error.empty() ? *std::min_element(off.measured.begin(), off.measured.end()) : 0;
      absl::StrAppend(&rows, "| ", name, " | ", c.label, " | ",
                      c.threshold > 0 ? absl::StrCat(Fixed(c.threshold, 3)) : std::string("-"),
                      " | ", r.clipped_steps, " of ", r.grad_norms.size(), " | ", r.rolled_back,
                      " / ", r.deferred, " | ", Fixed(r.sim_step_bubble, 3), " | ",
                      Fixed(r.measured_step_bubble, 3), " | ", Fixed(r.sim_bubble, 3), " | ",
                      Fixed(r.measured_bubble, 3), " | ", Ms(r.fastest_actions_end), " | ",
                      Ms(best), " | ", best_off > 0 ? Fixed(best / best_off, 3) : std::string("-"));
      // Each run against the off run of the same round: the spread is the noise.
      if (off.error.empty() && off.measured.size() == r.measured.size() && repeats > 1) {
        rows += " (";
        for (size_t i = 0; i < r.measured.size(); ++i) {
          absl::StrAppend(&rows, i ? "; " : "", Fixed(r.measured[i] / off.measured[i], 3));
        }
        rows += ")";
      }
      rows += " |\n";
    }
  }
  const Stamp end = Now();
  std::string md = absl::StrCat(
      "## Gradient clipping with optimizer post-validation: bubble, clipping on vs off\n\n",
      Provenance(options, start, end), "The CPU comparison's GPT (", job.model.num_layers,
      " blocks, hidden ", job.model.hidden, ", seq_len ", job.model.seq_len, "), ",
      job.microbatches, " microbatches of ", job.microbatch_size,
      " sequences, p = 2 worker threads (one per core), AdamW with weight decay 0.1. For each "
      "schedule, one unclipped run measures the gradient norms; then, interleaved, ",
      repeats,
      " run(s) each of: clipping off; clipping at half the smallest norm (every step "
      "clipped, so the rank not holding stage 0 rolls back or defers every update); clipping at "
      "the median norm. Each run is one warm-up step and ",
      steps,
      " measured steps. Bubbles and actions are those of the fastest step of the last run; step is "
      "the fastest step over all runs (step vs off compares those; in brackets each round's runs, "
      "the same comparison, whose spread is the noise on this shared box). Step bubble: 1 - all "
      "compute / (workers x step), what the idling costs; per-stage bubble: 1 - the busiest "
      "worker's compute / the longest worker's own span, the number the papers print. Simulated "
      "bubble: the schedule simulated with the F/B/W/BW times measured in that run (the simulator "
      "has no optimizer step, so it does not change with clipping). Measured bubble: the action "
      "timeline of that step (it includes the wait for the verdict at the start of the step, "
      "where a rollback or a deferred update also runs). Actions: the latest end of a rank's last "
      "action; step: the slowest rank's whole step, with the end-of-step gradient-norm pass and "
      "the optimizer update. "
      "Rolled back / deferred: updates over both ranks and all steps of the last run (the rank of "
      "stage 0 never needs either).\n\n"
      "| schedule | clipping | clip_grad_norm | clipped steps | rolled back / deferred | step "
      "bubble simulated | measured | per-stage bubble simulated | measured | actions ms | step ms "
      "| step vs off |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      rows, "\n");
  Section section;
  section.markdown = md;
  return section;
}

}  // namespace pipetrain::bench
