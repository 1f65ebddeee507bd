// Every schedule side by side on the emulated backend (each worker a thread, each F/B/W a sleep
// of its cost, real activation allocations, in-memory transport) at p = 4, 8, 16: simulated and
// measured step time, bubble ratio and peak activation memory per worker.
#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/runtime/hop_latency.h"
#include "bench/suite/suite.h"
#include "kernels/cpu/cpu_backend.h"
#include "schedule/generator.h"
#include "schedule/measured_timeline.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/in_process_pipeline.h"

namespace pipetrain::bench {
namespace {

constexpr double kBytesPerUnit = 64 << 10;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Nominal duration of a compute action under `costs`.
double Nominal(const schedule::CostModel& costs, const schedule::Action& a) {
  const schedule::StageCost& c = costs.stages[a.stage];
  switch (a.kind) {
    case schedule::ActionKind::kF:
    case schedule::ActionKind::kOverlapF: return c.f;
    case schedule::ActionKind::kB: return c.b;
    case schedule::ActionKind::kW: return c.w;
    default: return c.FusedBackward();
  }
}

// Runs `plan` on p emulated workers: `steps` measured steps after one warm-up step. Returns the
// median step time, the bubbles (per stage, and of the step) and peak (units) of the median step,
// and the mean time a compute
// action of that step overran its nominal cost (sleep wake-up latency, scheduling under load).
absl::Status RunEmulated(const schedule::Schedule& plan, const schedule::CostModel& costs,
                         int steps, double* step_s, double* bubble, double* step_bubble,
                         double* peak_units, double* overrun) {
  const int p = plan.num_workers;
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<worker::EmulatedStageRunner>> runners;
  std::vector<worker::StageRunner*> raw;
  for (int r = 0; r < p; ++r) {
    backends.push_back(std::make_unique<kernels::CpuBackend>());
    runners.push_back(std::make_unique<worker::EmulatedStageRunner>(
        backends.back().get(), plan.num_stages,
        worker::EmulatedStageConfig{costs, kBytesPerUnit, 256}));
    raw.push_back(runners.back().get());
  }
  worker::FakeTransportHub hub(p);
  auto results = worker::RunInProcess(plan, raw, steps + 1, &hub);
  if (!results.ok()) return results.status();
  std::vector<std::pair<double, int>> by_time;
  int64_t peak = 0;
  for (int s = 1; s <= steps; ++s) {
    int64_t longest = 0;
    for (int r = 0; r < p; ++r) {
      longest = std::max(longest, (*results)[r][s].duration_ns);
      peak = std::max(peak, (*results)[r][s].peak_activation_bytes);
    }
    by_time.push_back({longest * 1e-9, s});
  }
  std::sort(by_time.begin(), by_time.end());
  const auto [median, step] = by_time[by_time.size() / 2];
  std::vector<std::vector<worker::ActionTiming>> timings(p);
  double over = 0;
  int n = 0;
  for (int r = 0; r < p; ++r) {
    timings[r] = (*results)[r][step].timings;
    for (const worker::ActionTiming& t : timings[r]) {
      if (!schedule::IsCompute(t.action.kind)) continue;
      over += (t.end_ns - t.start_ns) * 1e-9 - Nominal(costs, t.action);
      ++n;
    }
  }
  *overrun = n > 0 ? over / n : 0;
  *step_s = median;
  const schedule::SimResult measured = schedule::MeasuredTimeline(plan, timings);
  *bubble = measured.bubble_ratio;
  *step_bubble = measured.step_bubble_ratio;
  *peak_units = peak / kBytesPerUnit;
  return absl::OkStatus();
}

}  // namespace

Section EmulatedComparison(const SuiteOptions& options, std::vector<Comparison>* results) {
  const Stamp start = Now();
  const double unit = options.quick ? 0.0004 : 0.004;  // seconds per F (= B = W) per worker
  const int steps = options.quick ? 1 : 3;
  const int repeats = options.quick ? 1 : std::max(1, options.repeats);
  const double hop = FakeTransportHopLatency(options.quick ? 50 : 500, 256);
  std::string md;
  for (int p : {4, 8, 16}) {
    Comparison cmp;
    cmp.p = p;
    cmp.m = options.quick ? p : 4 * p;
    for (const std::string& name : schedule::GeneratorNames()) {
      ScheduleRun run;
      run.name = name;
      const schedule::PipelineSpec spec = SuiteSpec(name, p, cmp.m, unit);
      auto compute = schedule::Generate(name, spec);
      if (!compute.ok()) {
        run.error = std::string(compute.status().message());
        cmp.runs.push_back(run);
        continue;
      }
      auto plan = schedule::AddTransfers(*compute);
      const schedule::CostModel costs = schedule::CostModelFor(spec, plan->ChunksPerWorker());
      auto sim = schedule::Simulate(*plan, costs);
      if (!plan.ok() || !sim.ok()) {
        run.error = "simulation failed";
        cmp.runs.push_back(run);
        continue;
      }
      run.sim_step = sim->makespan;
      run.sim_bubble = sim->bubble_ratio;
      run.sim_step_bubble = sim->step_bubble_ratio;
      run.sim_peak = *std::max_element(sim->peak_memory.begin(), sim->peak_memory.end());
      cmp.runs.push_back(run);
    }
    // Repetitions interleave the schedules so that load changes hit all of them alike.
    for (int rep = 0; rep < repeats; ++rep) {
      for (ScheduleRun& run : cmp.runs) {
        if (!run.error.empty()) continue;
        const schedule::PipelineSpec spec = SuiteSpec(run.name, p, cmp.m, unit);
        auto plan = schedule::AddTransfers(*schedule::Generate(run.name, spec));
        const schedule::CostModel costs = schedule::CostModelFor(spec, plan->ChunksPerWorker());
        double step_s = 0, bubble = 0, step_bubble = 0, peak = 0, overrun = 0;
        const absl::Status status =
            RunEmulated(*plan, costs, steps, &step_s, &bubble, &step_bubble, &peak, &overrun);
        if (!status.ok()) {
          run.error = std::string(status.message());
          continue;
        }
        schedule::CostModel calibrated = costs;
        for (auto& stage : calibrated.stages) {
          stage.f += overrun;
          stage.b += overrun;
          stage.w += overrun;
          if (stage.bw >= 0) stage.bw += overrun;
        }
        calibrated.comm = hop;
        auto cal = schedule::Simulate(*plan, calibrated);
        if (!cal.ok()) {
          run.error = std::string(cal.status().message());
          continue;
        }
        run.sim_calibrated.push_back(cal->makespan);
        run.overrun.push_back(overrun);
        run.measured_step.push_back(step_s);
        run.measured_bubble = bubble;
        run.measured_step_bubble = step_bubble;
        run.measured_peak = peak;
        run.ok = true;
      }
    }
    results->push_back(cmp);
  }
  const Stamp end = Now();

  md = absl::StrCat(
      "## Every schedule side by side: emulated backend, p = 4, 8, 16\n\n",
      Provenance(options, start, end),
      "One job per p: m = ", options.quick ? "p" : "4p", " microbatches, F = B = W = ",
      Fixed(unit * 1e3, 1),
      " ms per worker share (a V or interleaved worker runs two chunks of half that). Each "
      "worker is a thread of one process; each F/B/W sleeps for its cost; activations are "
      "really allocated (",
      static_cast<int>(kBytesPerUnit) >> 10,
      " KiB per unit) and counted; tensors go through the in-memory transport. Measured step: "
      "median of ",
      steps, " steps after a warm-up step, the whole table run ", repeats,
      " time(s) with the schedules interleaved (columns run 1, run 2, ...). *Calibrated* "
      "simulates the same plan with two terms measured in this run: every compute action's "
      "mean overrun of its nominal time in that schedule's measured step (sleep wake-up and "
      "scheduling delay on the loaded box; column *overrun*), and the in-memory transport's "
      "one-way hop (",
      Fixed(hop * 1e6, 1),
      " us, measured at the start). *measured / calibrated* is the median over the runs. A measured "
      "step is the longest rank's own step (RunStep start to end); ranks start their next step as "
      "soon as their own list is done, so consecutive steps overlap at the edges, which a "
      "one-step simulation does not model: a schedule whose first and last actions interleave "
      "well with the next step's (zb-h2) measures below its calibrated makespan. Two bubbles: the *step bubble*, 1 - all compute / "
      "(workers x step), is the share of the step lost to idling; the *per-stage bubble*, 1 - the "
      "busiest worker's compute / the longest worker's own span (first to last action), is the "
      "number the papers print, and is 0 for zb-h2 and zb-v although their step is longer than "
      "their work. Memory in units of one microbatch's activations for a worker's whole share of "
      "layers; predicted = measured means the allocator saw exactly the simulator's peak.\n\n");
  for (const Comparison& cmp : *results) {
    const ScheduleRun* base = nullptr;
    for (const ScheduleRun& r : cmp.runs) {
      if (r.name == "1f1b" && r.ok) base = &r;
    }
    absl::StrAppend(&md, "**p = ", cmp.p, ", m = ", cmp.m,
                    "**\n\n| schedule | simulated step ms (nominal) | overrun us (run 1) | simulated "
                    "(calibrated, run 1) | measured ms");
    for (int rep = 1; rep < repeats; ++rep) absl::StrAppend(&md, " | run ", rep + 1);
    absl::StrAppend(&md,
                    " | measured / calibrated | step bubble simulated | measured | per-stage "
                    "bubble simulated | measured | peak "
                    "units predicted | measured | throughput vs 1F1B (sim) | measured (run 1",
                    repeats > 1 ? absl::StrCat("; run ", repeats) : "", ") |\n|---|---|---|---|");
    for (int rep = 1; rep < repeats; ++rep) md += "---|";
    md += "---|---|---|---|---|---|---|---|---|---|\n";
    for (const ScheduleRun& r : cmp.runs) {
      if (!r.ok) {
        absl::StrAppend(&md, "| ", r.name, " | not run: ", r.error, " |\n");
        continue;
      }
      absl::StrAppend(&md, "| ", r.name, " | ", Ms(r.sim_step), " | ",
                      Fixed(r.overrun[0] * 1e6, 0), " | ", Ms(r.sim_calibrated[0]));
      for (double s : r.measured_step) absl::StrAppend(&md, " | ", Ms(s));
      std::string tput = "-";
      if (base != nullptr) {
        tput = Fixed(base->measured_step[0] / r.measured_step[0], 3);
        if (repeats > 1) {
          absl::StrAppend(&tput, "; ", Fixed(base->measured_step.back() / r.measured_step.back(), 3));
        }
      }
      std::vector<double> ratios;
      for (size_t i = 0; i < r.measured_step.size(); ++i) {
        ratios.push_back(r.measured_step[i] / r.sim_calibrated[i]);
      }
      absl::StrAppend(&md, " | ", Fixed(Median(ratios), 3), " | ",
                      Fixed(r.sim_step_bubble, 3), " | ", Fixed(r.measured_step_bubble, 3), " | ",
                      Fixed(r.sim_bubble, 3), " | ", Fixed(r.measured_bubble, 3), " | ",
                      Fixed(r.sim_peak, 2), " | ", Fixed(r.measured_peak, 2), " | ",
                      base ? Fixed(base->sim_step / r.sim_step, 3) : "-", " | ", tput, " |\n");
    }
    md += "\n";
  }
  Section section;
  section.markdown = md;
  return section;
}

}  // namespace pipetrain::bench
