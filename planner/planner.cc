#include "planner/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/cost_model.h"
#include "model/job_model.h"
#include "planner/job_spec_validation.h"
#include "planner/shared_host.h"
#include "schedule/auto_planner.h"
#include "schedule/codec/plan_proto.h"
#include "schedule/data_parallel_step.h"
#include "schedule/forward_only.h"
#include "schedule/generator.h"
#include "schedule/offload_pass.h"
#include "schedule/passes.h"

namespace pipetrain::planner {
namespace {

// Analytic FLOPs of F, B and W per stage for an even split into `num_stages` stages.
struct StageFlops {
  std::vector<double> f, b, w;
};

absl::StatusOr<StageFlops> FlopsPerStage(const model::GptConfig& config, int num_stages,
                                         int microbatch_size) {
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> specs, model::SplitEvenly(config, num_stages));
  StageFlops flops;
  for (const model::ChunkSpec& spec : specs) {
    const model::ChunkCost c = model::EstimateChunkCost(config, spec, microbatch_size);
    flops.f.push_back(c.forward_flops);
    flops.b.push_back(c.backward_input_flops);
    flops.w.push_back(c.backward_weight_flops);
  }
  return flops;
}

double Sum(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return total;
}

// Seconds per FLOP of one action kind from `measured` seconds of `flops` over the stages of a
// `layers`-block model, the fixed overhead of each block's action taken out first (never below
// zero).
double MeasuredSecondsPerFlop(const std::vector<double>& measured, const std::vector<double>& flops,
                              double overhead_per_block, int layers) {
  const double variable = Sum(measured) - overhead_per_block * layers;
  return std::max(0.0, variable) / Sum(flops);
}

// Seconds of each action kind on each of `num_stages` stages: measured, scaled from a measured
// split, or analytic at the assumed device rate; the last two with the fixed per-action
// overhead (PlannerOptions::action_overhead) on every action.
absl::StatusOr<StageFlops> StageSeconds(const model::GptConfig& config, int num_stages,
                                        int microbatch_size, const PlannerOptions& options) {
  PT_ASSIGN_OR_RETURN(StageFlops t, FlopsPerStage(config, num_stages, microbatch_size));
  const std::optional<MeasuredStageCosts>& measured = options.measured;
  if (measured.has_value() && measured->num_stages == num_stages) {
    return StageFlops{measured->forward_s, measured->backward_input_s, measured->backward_weight_s};
  }
  const ActionOverhead& o = options.action_overhead;
  double per_flop_f = 1.0 / options.device_flops_per_s, per_flop_b = per_flop_f,
         per_flop_w = per_flop_f;
  if (measured.has_value()) {
    PT_ASSIGN_OR_RETURN(StageFlops m, FlopsPerStage(config, measured->num_stages, microbatch_size));
    const int layers = config.num_layers;
    per_flop_f = MeasuredSecondsPerFlop(measured->forward_s, m.f, o.forward_s, layers);
    per_flop_b =
        MeasuredSecondsPerFlop(measured->backward_input_s, m.b, o.backward_input_s, layers);
    per_flop_w =
        MeasuredSecondsPerFlop(measured->backward_weight_s, m.w, o.backward_weight_s, layers);
  }
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> specs, model::SplitEvenly(config, num_stages));
  for (int i = 0; i < num_stages; ++i) {
    const double blocks = specs[i].num_blocks;
    t.f[i] = blocks * o.forward_s + t.f[i] * per_flop_f;
    t.b[i] = blocks * o.backward_input_s + t.b[i] * per_flop_b;
    t.w[i] = blocks * o.backward_weight_s + t.w[i] * per_flop_w;
  }
  return t;
}

// Exact per-stage costs for a schedule of `num_stages` stages.
// stash_element_bytes: model::StashElementBytes of the job (bf16 stashes halve activations).
absl::StatusOr<schedule::CostModel> StageCosts(const model::GptConfig& config, int num_stages,
                                               int microbatch_size, int64_t stash_element_bytes,
                                               const PlannerOptions& options) {
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> specs,
                      model::SplitEvenly(config, num_stages));
  PT_ASSIGN_OR_RETURN(StageFlops seconds,
                      StageSeconds(config, num_stages, microbatch_size, options));
  schedule::CostModel costs;
  costs.bytes_per_unit = 1.0;
  int64_t boundary_bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const model::ChunkCost c =
        model::EstimateChunkCost(config, specs[i], microbatch_size, stash_element_bytes);
    schedule::StageCost s;
    s.f = seconds.f[i];
    s.b = seconds.b[i];
    s.w = seconds.w[i];
    s.activation = static_cast<double>(c.activation_bytes_after_forward);
    s.freed_by_b = static_cast<double>(c.activation_bytes_after_forward -
                                       c.activation_bytes_after_backward_input);
    boundary_bytes = std::max(boundary_bytes, c.output_activation_bytes);
    costs.stages.push_back(s);
  }
  costs.comm = options.link_latency_s + boundary_bytes / options.link_bytes_per_s;
  return costs;
}

// The activation bytes a worker may hold: memory.device_budget_bytes, or, when that is 0 and the
// devices' memory is known, that memory less the most parameter state (values, gradients, AdamW
// moments) one worker can hold. The bound for that: the even p-way split's first and last
// stages together (a V schedule puts both on worker 0; any single stage holds no more).
absl::StatusOr<double> ActivationBudget(const v1::JobSpec& spec, const model::GptConfig& config,
                                        int p, int mbs, const PlannerOptions& options) {
  if (spec.memory().device_budget_bytes() > 0 || options.device_memory_bytes <= 0) {
    return static_cast<double>(spec.memory().device_budget_bytes());
  }
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> split, model::SplitEvenly(config, p));
  int64_t parameters = model::EstimateChunkCost(config, split.front(), mbs).parameter_state_bytes;
  if (p > 1) {
    parameters += model::EstimateChunkCost(config, split.back(), mbs).parameter_state_bytes;
  }
  if (parameters >= options.device_memory_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory.device_budget_bytes: the model's parameters, gradients and optimizer state take "
        "up to ", parameters, " bytes on a worker, more than its device's ",
        options.device_memory_bytes, " bytes; use more workers or a smaller model"));
  }
  return static_cast<double>(options.device_memory_bytes - parameters);
}

}  // namespace

absl::StatusOr<v1::Plan> EvaluationPlan(const PlannedJob& training, int batches) {
  PT_ASSIGN_OR_RETURN(schedule::Schedule compute,
                      schedule::MakeForwardOnly(training.schedule.num_workers,
                                                training.schedule.stage_to_worker, batches));
  PT_ASSIGN_OR_RETURN(schedule::Schedule with_transfers, schedule::AddTransfers(compute));
  const schedule::CostModel costs = schedule::ForwardOnlyCosts(training.costs);
  PT_ASSIGN_OR_RETURN(schedule::SimResult sim, schedule::Simulate(with_transfers, costs));
  v1::Plan plan = schedule::PlanToProto(with_transfers, costs, &sim);
  plan.mutable_stage_first_layer()->CopyFrom(training.plan.stage_first_layer());
  plan.mutable_stage_num_layers()->CopyFrom(training.plan.stage_num_layers());
  plan.set_costs_measured(training.plan.costs_measured());
  plan.set_explanation(absl::StrFormat(
      "validation pass: forward only on the training placement, %d microbatches; predicted %.3f s",
      batches, sim.makespan));
  return plan;
}

absl::StatusOr<schedule::StepCpuWork> StepCpuWorkOf(const v1::JobSpec& spec, int num_stages,
                                                    const PlannerOptions& options) {
  const v1::JobSpec full = model::WithDefaults(spec);
  PT_ASSIGN_OR_RETURN(model::GptConfig config, model::ModelConfig(full));
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> split, model::SplitEvenly(config, num_stages));
  std::vector<int64_t> bytes;
  int64_t boundary_bytes = 0;
  for (const model::ChunkSpec& s : split) {
    const model::ChunkCost c =
        model::EstimateChunkCost(config, s, full.training().microbatch_size());
    bytes.push_back(c.parameter_bytes);
    boundary_bytes = std::max(boundary_bytes, c.output_activation_bytes);
  }
  schedule::StepCpuWork work = schedule::StepCpuWorkFromBytes(bytes, model::DataParallelSize(full),
                                                              options.gradient_sum_bytes_per_s,
                                                              options.optimizer_bytes_per_s);
  if (options.message_cpu_bytes_per_s > 0 && num_stages > 1) {
    work.message_cpu_s = options.message_cpu_fixed_s +
                         static_cast<double>(boundary_bytes) / options.message_cpu_bytes_per_s;
  }
  return work;
}

absl::StatusOr<PlannedJob> PlanJob(const v1::JobSpec& submitted, const PlannerOptions& options) {
  PT_RETURN_IF_ERROR(ValidateJobSpec(submitted));
  const v1::JobSpec spec = model::WithDefaults(submitted);
  PT_ASSIGN_OR_RETURN(model::GptConfig config, model::ModelConfig(spec));
  const int p = spec.parallelism().num_workers();
  // Each data-parallel replica runs the plan on its share of the step's microbatches.
  const int m = model::MicrobatchesPerReplica(spec);
  const int mbs = spec.training().microbatch_size();
  const std::string& name = spec.parallelism().schedule();
  absl::StatusOr<int> chunks =
      schedule::ChunksPerWorker(name, spec.parallelism().chunks_per_worker());
  if (!chunks.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("parallelism.", chunks.status().message()));
  }
  // The most stages the schedule may use (`auto` may pick a V schedule: 2p); the model must be
  // deep enough for that.
  const int max_stages = p * *chunks;
  if (config.num_layers < max_stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.num_layers: ", config.num_layers, " layers cannot fill ", max_stages,
        " pipeline stages (", p, " workers x ", max_stages / p, " chunks for schedule ", name,
        "); use at least ", max_stages, " layers, fewer workers, or a 1-chunk schedule"));
  }

  if (const int64_t cells = int64_t{max_stages} * m; cells > kMaxPlanCells) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.global_batch: ", m, " microbatches per step on ", max_stages, " stages (", p,
        " workers x ", max_stages / p, " chunks) make ", cells,
        " (stage, microbatch) pairs; a plan holds at most ", kMaxPlanCells,
        ": use fewer microbatches per step (a larger training.microbatch_size) or fewer workers"));
  }

  // Plan with one cost per worker share (the generators' convention), in seconds and "units"
  // of one microbatch's activations for an average worker share.
  const int64_t stash_bytes = model::StashElementBytes(spec);
  PT_ASSIGN_OR_RETURN(schedule::CostModel share_costs,
                      StageCosts(config, p, mbs, stash_bytes, options));
  double f = 0, b = 0, w = 0, bytes = 0;
  for (const schedule::StageCost& s : share_costs.stages) {
    f += s.f / p;
    b += s.b / p;
    w += s.w / p;
    bytes += s.activation / p;
  }
  schedule::PipelineSpec pspec;
  pspec.num_workers = p;
  pspec.num_microbatches = m;
  pspec.chunks_per_worker = spec.parallelism().chunks_per_worker();
  pspec.f = f;
  pspec.b = b;
  pspec.w = w;
  pspec.comm = share_costs.comm;
  PT_ASSIGN_OR_RETURN(const double budget, ActivationBudget(spec, config, p, mbs, options));
  if (budget > 0) pspec.memory_limit = budget / bytes;
  // Activation offload: the host link, as an offload ratio k for the share-unit plan.
  const v1::OffloadPolicy policy = spec.memory().offload();
  const bool offload = policy != v1::OFFLOAD_POLICY_UNSPECIFIED && policy != v1::OFFLOAD_POLICY_NONE;
  double host_link = spec.memory().host_link_bytes_per_s();
  if (host_link <= 0 && options.host_d2h_bytes_per_s > 0 && options.host_h2d_bytes_per_s > 0) {
    host_link = std::min(options.host_d2h_bytes_per_s, options.host_h2d_bytes_per_s);
  }
  if (offload && !(host_link > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory.offload: ", v1::OffloadPolicy_Name(policy),
        " needs the host link bandwidth: set memory.host_link_bytes_per_s, or run workers that "
        "measured theirs at start-up"));
  }
  // k: a worker share's stash out and back over its F+B+W (offload_ratio.h).
  const double ratio = f + b + w > 0 && host_link > 0 ? 2 * bytes / host_link / (f + b + w) : 0;
  if (offload) pspec.offload_ratio = ratio;
  if (policy == v1::OFFLOAD_POLICY_AUTO && name != "auto") pspec.offload_ratio = 0;
  absl::StatusOr<schedule::Schedule> generated = schedule::Generate(name, pspec);
  if (!generated.ok() && generated.status().code() == absl::StatusCode::kResourceExhausted &&
      budget > 0) {
    return absl::ResourceExhaustedError(absl::StrCat("memory.device_budget_bytes: ",
                                                     generated.status().message(), " (units of ",
                                                     bytes, " bytes)"));
  }
  PT_RETURN_IF_ERROR(generated.status());
  schedule::Schedule compute = *std::move(generated);
  if (offload && name != "auto") {
    // A named schedule: the policy's pass (AUTO: selective, only if it does not fit).
    schedule::OffloadOptions o;
    o.memory_limit = pspec.memory_limit;
    o.mode = policy == v1::OFFLOAD_POLICY_HALF   ? schedule::OffloadMode::kHalf
             : policy == v1::OFFLOAD_POLICY_FULL ? schedule::OffloadMode::kFull
                                                 : schedule::OffloadMode::kSelective;
    schedule::PipelineSpec link = pspec;
    link.offload_ratio = ratio;
    const schedule::CostModel share = schedule::CostModelFor(link, compute.ChunksPerWorker());
    bool needed = policy != v1::OFFLOAD_POLICY_AUTO;
    if (!needed && budget > 0) {
      PT_ASSIGN_OR_RETURN(schedule::SimResult plain, schedule::Simulate(compute, share));
      needed = *std::max_element(plain.peak_memory.begin(), plain.peak_memory.end()) >
               pspec.memory_limit;
    }
    if (needed && (o.mode != schedule::OffloadMode::kSelective || budget > 0)) {
      absl::StatusOr<schedule::OffloadPlan> plan = schedule::AddOffload(compute, share, o);
      if (!plan.ok()) {
        return absl::Status(plan.status().code(),
                            absl::StrCat("memory.device_budget_bytes: ", plan.status().message(),
                                         " (units of ", bytes, " bytes)"));
      }
      compute = std::move(plan->schedule);
    }
  }
  // `auto` chose on the uniform per-share model; per-stage sizes and transfers (below) can put a
  // worker over a budget that model said fits. Then the other plans that fit it are tried,
  // fastest first, and the first that fits in bytes is taken.
  PlannedJob planned;
  planned.bytes_per_unit = bytes;
  std::vector<schedule::Schedule> fallbacks;
  size_t next_fallback = 1;  // fallbacks[0] is `compute` itself (FittingAutoPlans' first)
  double smallest = std::numeric_limits<double>::infinity();
  std::string smallest_name, first_name;
  for (;;) {
    PT_ASSIGN_OR_RETURN(schedule::Schedule with_transfers, schedule::AddTransfers(compute));
    PT_ASSIGN_OR_RETURN(schedule::CostModel costs,
                        StageCosts(config, with_transfers.num_stages, mbs, stash_bytes, options));
    if (host_link > 0) costs.d2h_bytes_per_s = costs.h2d_bytes_per_s = host_link;
    PT_ASSIGN_OR_RETURN(schedule::SimResult sim, schedule::Simulate(with_transfers, costs));
    const double peak = *std::max_element(sim.peak_memory.begin(), sim.peak_memory.end());
    if (!(budget > 0) || peak <= budget) {
      planned.schedule = std::move(with_transfers);
      planned.costs = std::move(costs);
      planned.sim = std::move(sim);
      break;
    }
    if (first_name.empty()) first_name = with_transfers.name;
    if (peak < smallest) {
      smallest = peak;
      smallest_name = with_transfers.name;
    }
    if (name == "auto" && fallbacks.empty()) fallbacks = schedule::FittingAutoPlans(pspec);
    if (name != "auto") {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "memory.device_budget_bytes: schedule %s needs %.0f activation bytes on its busiest "
          "worker, over the budget of %.0f; try schedule auto, v-half or v-min, more workers, a "
          "smaller training.microbatch_size, or offload",
          with_transfers.name, peak, budget));
    }
    if (next_fallback >= fallbacks.size()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "memory.device_budget_bytes: no plan fits the budget of %.0f activation bytes per "
          "worker once per-stage sizes and transfers are counted (%d plans fit the uniform "
          "model, the fastest %s); the smallest achievable peak is %.0f bytes (%s); try more "
          "workers, a smaller training.microbatch_size, or %s",
          budget, static_cast<int>(fallbacks.size()), first_name, smallest, smallest_name,
          offload ? "a faster host link (memory.host_link_bytes_per_s)"
                  : "activation offload (memory.offload)"));
    }
    compute = std::move(fallbacks[next_fallback++]);
  }
  const double peak = *std::max_element(planned.sim.peak_memory.begin(),
                                        planned.sim.peak_memory.end());
  planned.plan = schedule::PlanToProto(planned.schedule, planned.costs, &planned.sim);
  planned.plan.mutable_prediction()->clear_peak_activation_units();
  for (double peak_bytes : planned.sim.peak_memory) {
    planned.plan.mutable_prediction()->add_peak_activation_units(peak_bytes / bytes);
  }
  if (const int64_t size = static_cast<int64_t>(planned.plan.ByteSizeLong());
      size > kMaxPlanBytes) {
    size_t actions = 0;
    for (const auto& worker : planned.schedule.worker_actions) actions += worker.size();
    return absl::InvalidArgumentError(absl::StrCat(
        "training.global_batch: the plan of ", m, " microbatches on ",
        planned.schedule.num_stages, " stages encodes to ", size, " bytes (", actions,
        " actions), over the limit of ", kMaxPlanBytes,
        " bytes (it travels in one gRPC message to every worker): use fewer microbatches per "
        "step (a larger training.microbatch_size) or fewer workers"));
  }
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> split,
                      model::SplitEvenly(config, planned.schedule.num_stages));
  for (const model::ChunkSpec& s : split) {
    planned.plan.add_stage_first_layer(s.first_block);
    planned.plan.add_stage_num_layers(s.num_blocks);
  }
  planned.plan.set_costs_measured(options.measured.has_value());
  // Data parallelism: each stage's gradient sum across the replicas after its last
  // weight-gradient action, and the step with them (schedule/data_parallel_step.h).
  const int replicas = model::DataParallelSize(spec);
  std::string data_parallel_note;
  if (replicas > 1) {
    std::vector<double> allreduce;
    for (const model::ChunkSpec& s : split) {
      allreduce.push_back(schedule::StageAllReduceSeconds(
          model::EstimateChunkCost(config, s, mbs).parameter_bytes, replicas,
          options.link_bytes_per_s, options.link_latency_s));
    }
    PT_ASSIGN_OR_RETURN(const schedule::DataParallelStep step,
                        schedule::SimulateDataParallelStep(planned.schedule, planned.sim,
                                                           allreduce));
    v1::Prediction* prediction = planned.plan.mutable_prediction();
    for (double t : allreduce) prediction->add_stage_allreduce_s(t);
    prediction->set_data_parallel_step_s(step.step_s);
    planned.plan.set_data_parallel(replicas);
    planned.plan.set_allreduce_bytes_per_s(options.link_bytes_per_s);
    data_parallel_note = absl::StrFormat(
        "; x%d data-parallel replicas (%d workers): gradient sums up to %.2f ms per stage, "
        "predicted step with them %.3f s",
        replicas, replicas * p, 1e3 * *std::max_element(allreduce.begin(), allreduce.end()),
        step.step_s);
  }
  planned.plan.set_explanation(absl::StrFormat(
      "%s on %d workers x %d chunks, %d microbatches of %d; predicted step %.3f s, step bubble "
      "%.3f (per stage %.3f), peak activations %.2f MiB (%.2f units of %.2f MiB); costs %s",
      planned.schedule.name, p, planned.schedule.ChunksPerWorker(), m, mbs,
      planned.sim.makespan, planned.sim.step_bubble_ratio, planned.sim.bubble_ratio,
      peak / (1 << 20), peak / bytes,
      bytes / (1 << 20),
      options.measured.has_value()
          ? absl::StrFormat("measured by the workers' profiling step (%d stages)",
                            options.measured->num_stages)
          : absl::StrFormat("analytic (%.0f GFLOP/s per worker assumed, + %.0f/%.0f/%.0f us "
                            "per F/B/W action and block)",
                            options.device_flops_per_s / 1e9,
                            1e6 * options.action_overhead.forward_s,
                            1e6 * options.action_overhead.backward_input_s,
                            1e6 * options.action_overhead.backward_weight_s)));
  absl::StrAppend(planned.plan.mutable_explanation(), data_parallel_note);
  PT_ASSIGN_OR_RETURN(planned.cpu_work,
                      StepCpuWorkOf(spec, planned.schedule.num_stages, options));
  PT_RETURN_IF_ERROR(ApplySharedHost(options.shared_host_cores, &planned));
  if (planned.plan.prediction().shared_cpu_step_s() > 0) {
    absl::StrAppendFormat(planned.plan.mutable_explanation(), "; %s: step %.4f s",
                          planned.plan.prediction().shared_cpu_note(),
                          planned.plan.prediction().shared_cpu_step_s());
  }
  if (spec.eval().interval_steps() > 0) {
    PT_ASSIGN_OR_RETURN(*planned.plan.mutable_evaluation(),
                        EvaluationPlan(planned, spec.eval().batches()));
  }
  if (spec.memory().device_budget_bytes() <= 0 && budget > 0) {
    absl::StrAppendFormat(planned.plan.mutable_explanation(),
                          "; activation budget %.2f MiB: the device's %.2f MiB less parameters, "
                          "gradients and optimizer state",
                          budget / (1 << 20), options.device_memory_bytes / double{1 << 20});
  }
  return planned;
}

}  // namespace pipetrain::planner
