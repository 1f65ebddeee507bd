#include "bench/suite/cpu_run.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "bench/suite/suite.h"
#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/cost_model.h"
#include "schedule/measured_timeline.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "worker/runtime/in_process_pipeline.h"
#include "worker/runtime/model_stage_runner.h"

namespace pipetrain::bench {
namespace {

worker::MicrobatchSource Data(const model::GptConfig& c, int mbs) {
  return [c, mbs](int step, int mb) -> absl::StatusOr<worker::MicrobatchData> {
    std::mt19937 rng(static_cast<uint32_t>(7919 * step + mb + 1));
    std::uniform_int_distribution<int> tok(0, c.vocab - 1);
    worker::MicrobatchData d;
    for (int i = 0; i < mbs * c.seq_len; ++i) {
      d.tokens.push_back(tok(rng));
      d.targets.push_back((d.tokens.back() * 7 + 1) % c.vocab);
    }
    return d;
  };
}

// Stage costs with the model's exact stash bytes (times filled in later).
absl::StatusOr<schedule::CostModel> ByteCosts(const CpuJob& job, int num_stages) {
  PT_ASSIGN_OR_RETURN(auto specs, model::SplitEvenly(job.model, num_stages));
  schedule::CostModel costs;
  costs.bytes_per_unit = 1;
  for (const auto& spec : specs) {
    const model::ChunkCost c = model::EstimateChunkCost(job.model, spec, job.microbatch_size);
    schedule::StageCost s;
    s.activation = static_cast<double>(c.activation_bytes_after_forward);
    s.freed_by_b = static_cast<double>(c.activation_bytes_after_forward -
                                       c.activation_bytes_after_backward_input);
    costs.stages.push_back(s);
  }
  return costs;
}

// The generators' per-worker-share F/B/W from the analytic FLOPs (ratios matter, not the rate).
absl::StatusOr<schedule::PipelineSpec> JobSpec(const std::string& name, const CpuJob& job, int p) {
  PT_ASSIGN_OR_RETURN(auto specs, model::SplitEvenly(job.model, p));
  schedule::PipelineSpec spec = SuiteSpec(name, p, job.microbatches);
  spec.f = spec.b = spec.w = 0;
  for (const auto& s : specs) {
    const model::ChunkCost c = model::EstimateChunkCost(job.model, s, job.microbatch_size);
    spec.f += c.forward_flops / p / 1e9;
    spec.b += c.backward_input_flops / p / 1e9;
    spec.w += c.backward_weight_flops / p / 1e9;
  }
  return spec;
}

}  // namespace

absl::Status RunCpuSchedule(const CpuJob& job, int p, int steps,
                            const model::OptimizerSettings& optimizer, CpuRun* run) {
  PT_ASSIGN_OR_RETURN(schedule::PipelineSpec spec, JobSpec(run->name, job, p));
  PT_ASSIGN_OR_RETURN(schedule::Schedule compute, schedule::Generate(run->name, spec));
  PT_ASSIGN_OR_RETURN(schedule::Schedule plan, schedule::AddTransfers(compute));
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<worker::ModelStageRunner>> runners;
  std::vector<worker::StageRunner*> raw;
  for (int r = 0; r < p; ++r) {
    worker::ModelStageConfig mc;
    mc.model = job.model;
    mc.optimizer = optimizer;
    mc.num_stages = plan.num_stages;
    mc.num_microbatches = job.microbatches;
    for (int s = 0; s < plan.num_stages; ++s) {
      if (plan.WorkerOf(s) == r) mc.stages.push_back(s);
    }
    mc.data = Data(job.model, job.microbatch_size);
    backends.push_back(std::make_unique<kernels::CpuBackend>(
        kernels::CpuBackendOptions{.gemm_routing = job.gemm_routing}));
    PT_ASSIGN_OR_RETURN(auto runner, worker::ModelStageRunner::Create(backends.back().get(), mc));
    runners.push_back(std::move(runner));
    raw.push_back(runners.back().get());
  }
  worker::FakeTransportHub hub(p);
  PT_ASSIGN_OR_RETURN(auto results, worker::RunInProcess(plan, raw, steps + 1, &hub));
  run->grad_norms.clear();
  run->clipped_steps = 0;
  for (const worker::StepResult& res : results[plan.WorkerOf(0)]) {
    if (!res.grad_norm.has_value()) continue;
    run->grad_norms.push_back(*res.grad_norm);
    run->clipped_steps += res.grad_clipped ? 1 : 0;
  }
  run->rolled_back = run->deferred = 0;
  for (const auto& runner : runners) {
    run->rolled_back += runner->update_counts().rolled_back;
    run->deferred += runner->update_counts().deferred;
  }

  // Per-stage mean compute times over the measured steps.
  PT_ASSIGN_OR_RETURN(schedule::CostModel costs, ByteCosts(job, plan.num_stages));
  std::map<std::pair<int, int>, std::pair<double, int>> sums;  // (stage, kind) -> (sum, n)
  std::vector<std::pair<double, int>> by_time;
  int64_t peak = 0;
  for (int s = 1; s <= steps; ++s) {
    int64_t longest = 0;
    for (int r = 0; r < p; ++r) {
      const worker::StepResult& res = results[r][s];
      longest = std::max(longest, res.duration_ns);
      peak = std::max(peak, res.peak_activation_bytes);
      if (res.loss.has_value()) run->losses.push_back(*res.loss);
      for (const worker::ActionTiming& t : res.timings) {
        if (!schedule::IsCompute(t.action.kind)) continue;
        // An overlapped F runs as an F on one stream: it measures the stage's forward.
        const schedule::ActionKind kind = t.action.kind == schedule::ActionKind::kOverlapF
                                              ? schedule::ActionKind::kF
                                              : t.action.kind;
        auto& [sum, n] = sums[{t.action.stage, static_cast<int>(kind)}];
        sum += (t.end_ns - t.start_ns) * 1e-9;
        ++n;
      }
    }
    by_time.push_back({longest * 1e-9, s});
  }
  for (const auto& [key, value] : sums) {
    schedule::StageCost& c = costs.stages[key.first];
    const double mean = value.first / value.second;
    switch (static_cast<schedule::ActionKind>(key.second)) {
      case schedule::ActionKind::kF:
        c.f = mean;
        break;
      case schedule::ActionKind::kB:
        c.b = mean;
        break;
      case schedule::ActionKind::kW:
        c.w = mean;
        break;
      default:
        c.bw = mean;
        break;
    }
  }
  PT_ASSIGN_OR_RETURN(schedule::SimResult sim, schedule::Simulate(plan, costs));
  std::sort(by_time.begin(), by_time.end());
  // The fastest step: on a shared box, load only ever adds time.
  const auto [median, step] = by_time.front();
  std::vector<std::vector<worker::ActionTiming>> timings(p);
  for (int r = 0; r < p; ++r) timings[r] = results[r][step].timings;
  run->measured.push_back(median);
  int64_t actions_end = 0;
  for (int r = 0; r < p; ++r) {
    if (!results[r][step].timings.empty()) {
      actions_end = std::max(actions_end, results[r][step].timings.back().end_ns);
    }
  }
  run->fastest_actions_end = actions_end * 1e-9;
  run->simulated = sim.makespan;
  run->sim_bubble = sim.bubble_ratio;
  run->sim_step_bubble = sim.step_bubble_ratio;
  const schedule::SimResult measured = schedule::MeasuredTimeline(plan, timings);
  run->measured_bubble = measured.bubble_ratio;
  run->measured_step_bubble = measured.step_bubble_ratio;
  run->sim_peak = *std::max_element(sim.peak_memory.begin(), sim.peak_memory.end());
  run->measured_peak = static_cast<double>(peak);
  return absl::OkStatus();
}

}  // namespace pipetrain::bench
