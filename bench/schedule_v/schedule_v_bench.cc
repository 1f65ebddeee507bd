// Generation time of the V-shape schedules and of auto at p = 64, m = 1024 (unit costs).
// Each iteration runs the full generator through the registry (Generate: spec checks, the
// generator's variant search, ValidateSchedule). Results: docs/BENCHMARKS.md.
#include <string>

#include "benchmark/benchmark.h"
#include "coordinator/schedule/generator.h"

namespace pipetrain::schedule {
namespace {

void BM_Generate(benchmark::State& state, const std::string& name) {
  PipelineSpec spec;
  spec.num_workers = 64;
  spec.num_microbatches = 1024;
  if (name == "auto") spec.memory_limit = 40;
  for (auto _ : state) {
    absl::StatusOr<Schedule> s = Generate(name, spec);
    if (!s.ok()) state.SkipWithError(std::string(s.status().message()).c_str());
    benchmark::DoNotOptimize(s);
  }
}

BENCHMARK_CAPTURE(BM_Generate, v_min, std::string("v-min"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, v_half, std::string("v-half"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, v_zb, std::string("v-zb"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, zb_v, std::string("zb-v"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, auto_budget40, std::string("auto"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace pipetrain::schedule

BENCHMARK_MAIN();
