// Step time with and without activation offload, real pipetrain-worker processes on the CPU
// backend (see CMakeLists.txt). The machine is shared and noisy, so the two runs alternate
// (without, with) round by round, each run's step time is its fastest step after step 0 (the
// least disturbed one; the mean is printed too), and the result is the median over rounds of the
// per-round ratio, next to the ratio of the overall minima.
// Usage: offload_step_time [rounds=5] [cap multiple=1] [steps=12] [hidden=128] [analytic|calibrated]
// (calibrated: the planner's device rate is set from one measured run first, so the planned
// link is k = 0.4 against the real compute; analytic, the default: the planner's fixed rate).
// With OFFLOAD_BENCH_TRACE_DIR=DIR (DIR/with and DIR/without must exist) the workers also write
// per-step Chrome traces and JSON step reports there, to see which actions waited.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "planner/plan_file.h"
#include "planner/planner.h"
#include "worker/service/step_line.h"

namespace pt = pipetrain;

namespace {

constexpr int kWorkers = 2, kMicrobatches = 4;
int g_steps = 12, g_hidden = 128;

pt::v1::JobSpec Job() {
  pt::v1::JobSpec spec;
  spec.set_name("offload-bench");
  spec.mutable_model()->set_num_layers(8);
  spec.mutable_model()->set_hidden(g_hidden);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_model()->set_ffn_hidden(4 * g_hidden);
  spec.mutable_training()->set_steps(g_steps);
  spec.mutable_training()->set_microbatch_size(8);
  spec.mutable_training()->set_global_batch(8 * kMicrobatches);
  spec.mutable_training()->set_seed(7);
  spec.mutable_training()->mutable_optimizer()->set_learning_rate(1e-3);
  spec.mutable_parallelism()->set_num_workers(kWorkers);
  spec.mutable_parallelism()->set_schedule("interleaved-1f1b");
  return spec;
}

struct Timing {
  double min_ms = -1, mean_ms = -1;
};

// Rank 0's fastest and mean step time (ms) over steps 1..; -1 on failure.
Timing Run(const pt::v1::JobSpec& spec, const pt::v1::Plan& plan, double copy_bandwidth) {
  const std::string dir = pt::subprocess::TempDir();
  pt::planner::PlanFileOptions plan_file;
  plan_file.job_id = "bench";
  for (int r = 0; r < kWorkers; ++r) {
    plan_file.addresses.push_back(absl::StrCat("127.0.0.1:", pt::subprocess::FreePort()));
  }
  const absl::StatusOr<std::string> json = pt::planner::PlanFileJson(spec, plan, plan_file);
  if (!json.ok()) {
    std::fprintf(stderr, "%s\n", std::string(json.status().message()).c_str());
    return {};
  }
  const std::string path = dir + "/plan.json";
  std::ofstream(path) << *json;
  std::vector<pt::subprocess::Process> workers;
  const char* trace = std::getenv("OFFLOAD_BENCH_TRACE_DIR");  // per-step traces, for study
  for (int r = 0; r < kWorkers; ++r) {
    std::vector<std::string> argv = {PIPETRAIN_WORKER_BIN, "--plan", path, "--rank",
                                     std::to_string(r), "--copy-bandwidth",
                                     absl::StrCat(copy_bandwidth)};
    if (trace != nullptr) {
      argv.push_back("--trace-dir");
      argv.push_back(absl::StrCat(trace, copy_bandwidth > 0 ? "/with" : "/without"));
      argv.push_back("--report");
      argv.push_back(absl::StrCat(trace, copy_bandwidth > 0 ? "/with" : "/without", "/report", r));
    }
    workers.push_back(pt::subprocess::Spawn(argv, absl::StrCat(dir, "/rank", r)));
  }
  for (auto& w : workers) {
    auto code = pt::subprocess::WaitFor(w, absl::Seconds(300));
    if (!code.has_value() || *code != 0) {
      std::fprintf(stderr, "worker failed: %s\n", pt::subprocess::ReadFile(w.stderr_path).c_str());
      return {};
    }
  }
  double sum = 0, best = 1e300;
  int n = 0;
  for (const auto& [step, line] :
       pt::worker::ParseStepLines(pt::subprocess::ReadFile(workers[0].stdout_path))) {
    if (step == 0) continue;  // warm-up
    sum += line.time_ms;
    best = std::min(best, line.time_ms);
    ++n;
  }
  if (n == 0) return {};
  return {best, sum / n};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? -1 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  double faster = 1;  // cap = the plan's link x this (the plan itself stays the k = 0.4 one)
  if (argc > 1) absl::SimpleAtoi(argv[1], &rounds);
  if (argc > 2) absl::SimpleAtod(argv[2], &faster);
  if (argc > 3) absl::SimpleAtoi(argv[3], &g_steps);
  if (argc > 4) absl::SimpleAtoi(argv[4], &g_hidden);
  const bool calibrated = argc > 5 && std::string(argv[5]) == "calibrated";
  const pt::v1::JobSpec plain = Job();
  pt::planner::PlannerOptions options;
  auto base = pt::planner::PlanJob(plain, options);
  if (!base.ok()) {
    std::fprintf(stderr, "%s\n", std::string(base.status().message()).c_str());
    return 1;
  }
  if (calibrated) {
    // Plan with the compute speed this machine shows (one measured run without offload) instead
    // of the analytic rate, as the coordinator's profiling step does; the link is then set
    // against the real F+B+W.
    const Timing probe = Run(plain, base->plan, 0);
    if (probe.min_ms <= 0) return 1;
    options.device_flops_per_s *= base->sim.makespan * 1e3 / probe.min_ms;
    base = pt::planner::PlanJob(plain, options);
    if (!base.ok()) return 1;
    std::printf("calibrated: device rate %.3g FLOP/s (measured step %.1f ms)\n",
                options.device_flops_per_s, probe.min_ms);
  }
  double link = 0;  // every stage's copy, each way, <= 0.2 of its modelled F+B+W (k = 0.4)
  for (const auto& c : base->costs.stages) link = std::max(link, c.activation / (0.2 * (c.f + c.b + c.w)));
  pt::v1::JobSpec spec = plain;
  spec.mutable_memory()->set_offload(pt::v1::OFFLOAD_POLICY_FULL);
  spec.mutable_memory()->set_host_link_bytes_per_s(link);
  auto planned = pt::planner::PlanJob(spec, options);
  if (!planned.ok()) {
    std::fprintf(stderr, "%s\n", std::string(planned.status().message()).c_str());
    return 1;
  }
  int offloads = 0;
  for (const auto& list : planned->schedule.worker_actions) {
    for (const auto& a : list) offloads += a.kind == pt::schedule::ActionKind::kOffload;
  }
  std::printf("interleaved-1f1b p=%d m=%d, 8 layers h=%d ffn=%d mbs=8, %d steps a run; %d "
              "OFFLOADs per step; plan for a %.3g B/s link (k = 0.4 modelled: out and back 0.4 of F+B+W), copy cap %.3g B/s; "
              "predicted step %.1f ms without, %.1f ms with; predicted peak rank 0 %.0f -> %.0f "
              "bytes\n\n",
              kWorkers, kMicrobatches, g_hidden, 4 * g_hidden, g_steps, offloads, link,
              link * faster, base->sim.makespan * 1e3, planned->sim.makespan * 1e3,
              base->sim.peak_memory[0], planned->sim.peak_memory[0]);
  std::printf("| round | without: min (mean) ms | with: min (mean) ms | ratio of mins |\n"
              "|---|---|---|---|\n");
  std::vector<double> ratios, mins_without, mins_with;
  for (int r = 0; r < rounds; ++r) {  // alternate, so drift in machine load hits both
    const Timing a = Run(plain, base->plan, 0);
    const Timing b = Run(spec, planned->plan, link * faster);
    if (a.min_ms <= 0 || b.min_ms <= 0) return 1;
    ratios.push_back(b.min_ms / a.min_ms);
    mins_without.push_back(a.min_ms);
    mins_with.push_back(b.min_ms);
    std::printf("| %d | %.1f (%.1f) | %.1f (%.1f) | %.3f |\n", r + 1, a.min_ms, a.mean_ms,
                b.min_ms, b.mean_ms, ratios.back());
    std::fflush(stdout);
  }
  const double min_a = *std::min_element(mins_without.begin(), mins_without.end());
  const double min_b = *std::min_element(mins_with.begin(), mins_with.end());
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  std::printf("\nwith/without: median of the per-round ratios %.3f (range %.3f..%.3f); ratio of "
              "the overall minima %.3f (%.1f / %.1f ms)\n",
              Median(ratios), *lo, *hi, min_b / min_a, min_b, min_a);
  // The simulator with the compute it got wrong put right: every F/B/W scaled by the measured /
  // predicted step without offload, the link at the cap the copy thread ran with. What it still
  // misses is the copy thread's own CPU time (memcpy on the cores the compute runs on).
  const double scale = min_a / (base->sim.makespan * 1e3);
  auto rescaled = [&](pt::schedule::CostModel c, double bandwidth) {
    for (auto& st : c.stages) {
      st.f *= scale;
      st.b *= scale;
      st.w *= scale;
    }
    if (bandwidth > 0) c.d2h_bytes_per_s = c.h2d_bytes_per_s = bandwidth;
    return c;
  };
  auto sim_a = pt::schedule::Simulate(base->schedule, rescaled(base->costs, 0));
  auto sim_b = pt::schedule::Simulate(planned->schedule, rescaled(planned->costs, link * faster));
  if (sim_a.ok() && sim_b.ok()) {
    std::printf("simulated with compute scaled by %.3f (measured / predicted) and the cap as the "
                "link: %.1f ms without, %.1f ms with (%.3f)\n",
                scale, sim_a->makespan * 1e3, sim_b->makespan * 1e3,
                sim_b->makespan / sim_a->makespan);
  }
  return 0;
}
