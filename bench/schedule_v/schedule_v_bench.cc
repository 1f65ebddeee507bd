// Generation time of the V-shape schedules and of auto at p = 64, m = 1024: unit costs, and
// (BM_GenerateRealCosts) F:B:W = 1:1.5:0.5 with a transfer of 0.2, where the V generators'
// block searches have the most to do.
// Each iteration runs the full generator through the registry (Generate: spec checks, the
// generator's variant search, ValidateSchedule). Results: docs/BENCHMARKS.md.
#include <string>

#include "benchmark/benchmark.h"
#include "schedule/generator.h"

namespace pipetrain::schedule {
namespace {

void Run(benchmark::State& state, const std::string& name, const PipelineSpec& spec) {
  for (auto _ : state) {
    absl::StatusOr<Schedule> s = Generate(name, spec);
    if (!s.ok()) state.SkipWithError(std::string(s.status().message()).c_str());
    benchmark::DoNotOptimize(s);
  }
}

PipelineSpec BigSpec(const std::string& name) {
  PipelineSpec spec;
  spec.num_workers = 64;
  spec.num_microbatches = 1024;
  if (name == "auto") spec.memory_limit = 40;
  return spec;
}

void BM_Generate(benchmark::State& state, const std::string& name) {
  Run(state, name, BigSpec(name));
}

void BM_GenerateRealCosts(benchmark::State& state, const std::string& name) {
  PipelineSpec spec = BigSpec(name);
  spec.b = 1.5;
  spec.w = 0.5;
  spec.comm = 0.2;
  Run(state, name, spec);
}

BENCHMARK_CAPTURE(BM_Generate, v_min, std::string("v-min"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, v_half, std::string("v-half"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, v_zb, std::string("v-zb"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, zb_v, std::string("zb-v"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, auto_budget40, std::string("auto"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_Generate, dualpipev, std::string("dualpipev"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, interleaved_zb, std::string("interleaved-zb"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRealCosts, dualpipev, std::string("dualpipev"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRealCosts, interleaved_zb, std::string("interleaved-zb"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRealCosts, v_min, std::string("v-min"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRealCosts, v_half, std::string("v-half"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRealCosts, v_zb, std::string("v-zb"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRealCosts, zb_v, std::string("zb-v"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateRealCosts, auto_budget40, std::string("auto"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace pipetrain::schedule

BENCHMARK_MAIN();
