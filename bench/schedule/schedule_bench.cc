// Generate (which runs ValidateSchedule) + Simulate for each classic generator at p=64,
// m=1024, plus a scaling series in p*m. Target: each under 50 ms, cost ~linear in p*m.
// Also: the generators alone, and ValidateSchedule / Simulate alone on a V-shape schedule.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "schedule/cost_model.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

void PlanOnce(benchmark::State& state, const std::string& name, int p, int m, int v) {
  PipelineSpec spec;
  spec.num_workers = p;
  spec.num_microbatches = m;
  spec.chunks_per_worker = v;
  size_t actions = 0;
  for (auto _ : state) {
    auto s = Generate(name, spec);  // generate + ValidateSchedule
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    auto r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    actions = r->timeline.size();
    benchmark::DoNotOptimize(r->makespan);
  }
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["actions_per_s"] = benchmark::Counter(
      static_cast<double>(actions) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Plan_P64_M1024(benchmark::State& state, const char* name, int v) {
  PlanOnce(state, name, 64, 1024, v);
}
BENCHMARK_CAPTURE(BM_Plan_P64_M1024, gpipe, "gpipe", 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan_P64_M1024, 1f1b, "1f1b", 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan_P64_M1024, interleaved_v2, "interleaved-1f1b", 2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan_P64_M1024, zb_h1, "zb-h1", 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan_P64_M1024, zb_h2, "zb-h2", 0)->Unit(benchmark::kMillisecond);

// Scaling in p*m: args are (p, m).
void BM_Scaling(benchmark::State& state, const char* name) {
  PlanOnce(state, name, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), 0);
  state.counters["p_times_m"] = static_cast<double>(state.range(0) * state.range(1));
}
void ScalingArgs(benchmark::internal::Benchmark* b) {
  for (auto [p, m] :
       {std::pair{8, 64}, {16, 128}, {32, 256}, {64, 512}, {64, 1024}, {128, 1024}, {128, 2048}}) {
    b->Args({p, m});
  }
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(BM_Scaling, 1f1b, "1f1b")->Apply(ScalingArgs);
BENCHMARK_CAPTURE(BM_Scaling, zb_h1, "zb-h1")->Apply(ScalingArgs);

// The transfer pass on its own (it validates its input and output).
void BM_AddTransfers_P64_M1024(benchmark::State& state) {
  PipelineSpec spec;
  spec.num_workers = 64;
  spec.num_microbatches = 1024;
  auto s = Generate("1f1b", spec);
  for (auto _ : state) {
    auto t = AddTransfers(*s);
    benchmark::DoNotOptimize(t->worker_actions.size());
  }
}
BENCHMARK(BM_AddTransfers_P64_M1024)->Unit(benchmark::kMillisecond);

// ValidateSchedule and Simulate alone on a V-shape schedule (2 chunks per worker, 393,216
// compute actions at p=64, m=1024), generated once outside the timed loop.
const Schedule& VSchedule() {
  static const Schedule* const kSchedule = [] {
    PipelineSpec spec;
    spec.num_workers = 64;
    spec.num_microbatches = 1024;
    auto s = Generate("v-zb", spec);
    return s.ok() ? new Schedule(*std::move(s)) : new Schedule();
  }();
  return *kSchedule;
}
void BM_ValidateV_P64_M1024(benchmark::State& state) {
  const Schedule& s = VSchedule();
  if (s.num_workers == 0) {
    state.SkipWithError("v-zb generation failed");
    return;
  }
  for (auto _ : state) {
    absl::Status st = ValidateSchedule(s);
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      return;
    }
  }
  state.counters["actions"] = static_cast<double>(s.num_stages) * s.num_microbatches * 3;
}
BENCHMARK(BM_ValidateV_P64_M1024)->Unit(benchmark::kMillisecond);
void BM_SimulateV_P64_M1024(benchmark::State& state) {
  const Schedule& s = VSchedule();
  if (s.num_workers == 0) {
    state.SkipWithError("v-zb generation failed");
    return;
  }
  const CostModel costs = UniformCostModel(64, 2, 1, 1, 1);
  for (auto _ : state) {
    auto r = Simulate(s, costs);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r->makespan);
  }
}
BENCHMARK(BM_SimulateV_P64_M1024)->Unit(benchmark::kMillisecond);
void BM_ValidateSimulateV_P64_M1024(benchmark::State& state) {
  const Schedule& s = VSchedule();
  if (s.num_workers == 0) {
    state.SkipWithError("v-zb generation failed");
    return;
  }
  const CostModel costs = UniformCostModel(64, 2, 1, 1, 1);
  for (auto _ : state) {
    absl::Status st = ValidateSchedule(s);
    auto r = Simulate(s, costs);
    if (!st.ok() || !r.ok()) {
      state.SkipWithError("validate or simulate failed");
      return;
    }
    benchmark::DoNotOptimize(r->makespan);
  }
}
BENCHMARK(BM_ValidateSimulateV_P64_M1024)->Unit(benchmark::kMillisecond);

// The generator alone (no validation), to split Generate's time.
void BM_GeneratorOnly_P64_M1024(benchmark::State& state, const char* name, int v) {
  PipelineSpec spec;
  spec.num_workers = 64;
  spec.num_microbatches = 1024;
  spec.chunks_per_worker = v;
  const GeneratorInfo* gen = nullptr;
  for (const GeneratorInfo& g : Generators()) {
    if (g.name == name) gen = &g;
  }
  for (auto _ : state) {
    auto s = gen->fn(spec);
    benchmark::DoNotOptimize(s->worker_actions.size());
  }
}
BENCHMARK_CAPTURE(BM_GeneratorOnly_P64_M1024, gpipe, "gpipe", 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GeneratorOnly_P64_M1024, 1f1b, "1f1b", 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GeneratorOnly_P64_M1024, interleaved_v2, "interleaved-1f1b", 2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GeneratorOnly_P64_M1024, zb_h1, "zb-h1", 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GeneratorOnly_P64_M1024, zb_h2, "zb-h2", 0)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipetrain::schedule

BENCHMARK_MAIN();
