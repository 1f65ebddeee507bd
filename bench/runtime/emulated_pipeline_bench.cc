// Emulated pipeline: the runtime's measured step time against the simulator's makespan, and
// measured against predicted peak activation memory, for several schedules side by side.
// Each worker is a thread; compute is emulated (each F/B/W sleeps for its cost), transfers go
// through the in-memory transport, memory is really allocated and counted.
//
// The simulator is run twice: with the nominal costs, and with two terms measured on this
// machine in the same run (calibrated): the mean overshoot of an emulated action's sleep, added
// to every compute cost, and the one-way latency of a message through the in-memory transport
// (thread wake-up), used as the comm cost. The gap between the two columns is what those terms
// explain; what is left is unexplained.
//
// Usage: emulated_pipeline_bench [--workers 8] [--microbatches 64] [--unit-ms 5] [--steps 3]
//                                [--schedules 1f1b,zb-h1,v-half]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/runtime/hop_latency.h"
#include "kernels/cpu/cpu_backend.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/in_process_pipeline.h"

using namespace pipetrain;

namespace {

// Mean time an emulated action overruns its nominal duration (sleep_until wake-up latency).
double MeasureSleepOvershoot(double seconds, int samples) {
  double total = 0;
  for (int i = 0; i < samples; ++i) {
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_until(start +
                                  std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9)));
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
             seconds;
  }
  return total / samples;
}

}  // namespace

int main(int argc, char** argv) {
  int p = 8, m = 64, steps = 3;
  double unit_ms = 5;
  std::string names = "1f1b,zb-h1,v-half";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--workers") p = std::atoi(argv[i + 1]);
    else if (flag == "--microbatches") m = std::atoi(argv[i + 1]);
    else if (flag == "--unit-ms") unit_ms = std::atof(argv[i + 1]);
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--schedules") names = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const double overshoot = MeasureSleepOvershoot(unit_ms / 1000.0 / 2, 100);
  const double hop = bench::FakeTransportHopLatency(500, 1024);
  std::printf("emulated backend, p=%d m=%d, F=B=W=%.1f ms per worker share, %d steps (best)\n",
              p, m, unit_ms, steps);
  std::printf("calibration: sleep overshoot %.1f us per action, transport hop %.1f us\n\n",
              overshoot * 1e6, hop * 1e6);
  std::printf("| schedule | simulated ms (nominal) | simulated ms (calibrated) | measured step ms | "
              "measured/nominal | measured/calibrated | predicted peak MiB (max worker) | "
              "measured peak MiB (max worker) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view name : absl::StrSplit(names, ',')) {
    schedule::PipelineSpec spec;
    spec.num_workers = p;
    spec.num_microbatches = m;
    spec.f = spec.b = spec.w = unit_ms / 1000.0;
    auto compute = schedule::Generate(name, spec);
    if (!compute.ok()) {
      std::printf("| %s | %s |\n", std::string(name).c_str(),
                  std::string(compute.status().message()).c_str());
      continue;
    }
    auto plan = schedule::AddTransfers(*compute);
    schedule::CostModel costs = schedule::CostModelFor(spec, plan->ChunksPerWorker());
    auto sim = schedule::Simulate(*plan, costs);
    if (!plan.ok() || !sim.ok()) return 1;
    schedule::CostModel calibrated = costs;
    for (auto& stage : calibrated.stages) {
      stage.f += overshoot;
      stage.b += overshoot;
      stage.w += overshoot;
      if (stage.bw >= 0) stage.bw += overshoot;
    }
    calibrated.comm = hop;
    auto calibrated_sim = schedule::Simulate(*plan, calibrated);
    if (!calibrated_sim.ok()) return 1;
    constexpr double kBytesPerUnit = 1 << 20;
    std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
    std::vector<std::unique_ptr<worker::EmulatedStageRunner>> runners;
    std::vector<worker::StageRunner*> raw;
    for (int r = 0; r < p; ++r) {
      backends.push_back(std::make_unique<kernels::CpuBackend>());
      runners.push_back(std::make_unique<worker::EmulatedStageRunner>(
          backends.back().get(), plan->num_stages,
          worker::EmulatedStageConfig{costs, kBytesPerUnit, 1024}));
      raw.push_back(runners.back().get());
    }
    worker::FakeTransportHub hub(p);
    auto results = worker::RunInProcess(*plan, raw, steps, &hub);
    if (!results.ok()) {
      std::fprintf(stderr, "%s\n", results.status().ToString().c_str());
      return 1;
    }
    double best_ms = 1e30;
    int64_t peak = 0;
    for (int s = 0; s < steps; ++s) {
      int64_t longest = 0;
      for (int r = 0; r < p; ++r) {
        longest = std::max(longest, (*results)[r][s].duration_ns);
        peak = std::max(peak, (*results)[r][s].peak_activation_bytes);
      }
      best_ms = std::min(best_ms, longest / 1e6);
    }
    const double sim_ms = sim->makespan * 1000;
    const double predicted_peak = *std::max_element(sim->peak_memory.begin(),
                                                    sim->peak_memory.end());
    const double cal_ms = calibrated_sim->makespan * 1000;
    std::printf("| %s | %.1f | %.1f | %.1f | %.3f | %.3f | %.1f | %.1f |\n",
                std::string(name).c_str(), sim_ms, cal_ms, best_ms, best_ms / sim_ms,
                best_ms / cal_ms, predicted_peak, peak / kBytesPerUnit);
    std::fflush(stdout);
  }
  return 0;
}
