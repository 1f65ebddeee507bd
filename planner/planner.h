// Planner: JobSpec -> Plan. Builds the cost model from the model's analytic FLOPs and activation
// bytes (model/cost_model.h) and the device and link speeds -- or, once the workers ran
// the profiling step, from their measured per-stage F, B and W times -- runs the named schedule
// generator (or `auto` under the memory budget), adds transfers, validates, and simulates with
// the exact per-stage costs to predict step time, bubble and peak activation bytes per worker.
// The worker builds stage s from the same even split of layers the plan records.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_PLANNER_PLANNER_H_
#define PIPETRAIN_PLANNER_PLANNER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipetrain/v1/job.pb.h"
#include "pipetrain/v1/plan.pb.h"
#include "planner/action_overhead.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"
#include "schedule/step_cpu_work.h"

namespace pipetrain::planner {

// Per-stage times of one microbatch measured by the workers' profiling step on a plan with
// `num_stages` stages (even layer split). Planning a schedule with the same number of stages uses
// them as they are; another stage count (e.g. `auto` weighing V schedules against 1F1B) scales
// the analytic FLOPs of each action kind by the measured seconds per FLOP of that kind.
struct MeasuredStageCosts {
  int num_stages = 0;
  std::vector<double> forward_s, backward_input_s, backward_weight_s;  // by stage
};

struct PlannerOptions {
  // Sustained FLOP/s of one worker's device for GEMM-dominated work (CPU default: one core with
  // OpenBLAS; replaced by measured per-action times when workers report them).
  double device_flops_per_s = 30e9;
  // The fixed time of every F, B and W per block of its stage, whatever the microbatch size
  // (action_overhead.h; default measured on the CPU runtime). An analytic action of a stage of
  // k blocks takes k x overhead + FLOPs / rate. Measured costs at the plan's own stage count are
  // used as measured (they contain it); scaled to another stage count, the overhead is taken out
  // of the measured times before the seconds per FLOP are derived, and added back per action.
  ActionOverhead action_overhead = kCpuActionOverhead;
  // Point-to-point link between workers: latency and bandwidth.
  double link_latency_s = 100e-6;
  double link_bytes_per_s = 1.5e9;
  // Host link (activation offload), bytes/s each way, as the workers measured it at start-up
  // (the slowest of the job's workers); used when memory.host_link_bytes_per_s is 0.
  double host_d2h_bytes_per_s = 0;
  double host_h2d_bytes_per_s = 0;
  // Measured times replace the FLOP-rate model when set (see MeasuredStageCosts).
  std::optional<MeasuredStageCosts> measured;
  // Memory of the job's devices (the smallest, for CUDA workers; 0: unknown or unbounded, as
  // for CPU workers). With memory.device_budget_bytes 0 the activation budget is then this less
  // the parameter, gradient and optimizer bytes the busiest worker can hold.
  int64_t device_memory_bytes = 0;
  // Offline planning only (`pipetrain plan --host-cores`): every CPU worker of the job (d x p)
  // on one host with this many cores; the prediction then gets the shared-core step
  // (shared_host.h). 0: a device per worker (the coordinator corrects for the hosts it sees).
  int shared_host_cores = 0;
  // The step's CPU work besides F, B and W, per byte of a stage's parameters
  // (schedule/step_cpu_work.h), in the shared-core step (shared_host.h, coordinator/
  // shared_cpu.h): a replica's part of a stage's gradient sum (copying the sum out, installing
  // the running sum) and the optimizer step (gradient norm and AdamW). Measured on the CPU
  // runtime by bench/runtime/action_overhead_bench.cc (default job, best of 5, four runs at load
  // average 5.3 on the 2 cores, 2026-11-27 03:10 UTC): sums 8.3-9.0 GB/s, optimizer 1.96-2.18
  // GB/s; the medians. 0 leaves a term out.
  double gradient_sum_bytes_per_s = 8.8e9;
  double optimizer_bytes_per_s = 2.0e9;
  // And the CPU of one message between workers of a shared host, all threads together:
  // message_cpu_fixed_s + its bytes / message_cpu_bytes_per_s (StepCpuWork::message_cpu_s).
  // Measured by bench/transport/message_cpu_bench.cc (TcpTransport ping-pong between two
  // processes, 4 KiB to 512 KiB, best of 3-5 runs; 2026-11-27 22:53 UTC on the 2-core box, three
  // runs: 25.7 / 41.4 / 43.9 us + bytes / 4.06 / 3.16 / 2.95 GB/s); about the last two. A rate <= 0
  // leaves the term out.
  double message_cpu_fixed_s = 40e-6;
  double message_cpu_bytes_per_s = 3.0e9;
  // SearchDataParallel with `auto`: also try every microbatch size dividing the global batch.
  // Off by default (docs/data_parallel.md says what was measured with `action_overhead`); the
  // job's own size is planned then.
  bool search_microbatch_size = false;
};

struct PlannedJob {
  v1::Plan plan;                // what is stored with the job and sent to workers
  schedule::Schedule schedule;  // with transfers
  schedule::CostModel costs;    // exact, per stage: seconds and bytes (bytes_per_unit = 1)
  schedule::SimResult sim;      // the prediction, in seconds and bytes
  double bytes_per_unit = 0;    // one microbatch's activations of an average worker share
  schedule::StepCpuWork cpu_work;  // StepCpuWorkOf the plan's stages
};

// ValidateJobSpec first; then plan. Errors: InvalidArgument naming the field (e.g. too few
// layers for the stages), ResourceExhausted when no schedule fits memory.device_budget_bytes
// (saying the smallest peak reachable and what would help).
// Offload (memory.offload): HALF / FULL / SELECTIVE run the offload pass (offload_pass.h) on the
// schedule; AUTO lets `auto` weigh offload plans against schedules (or, for a named schedule,
// offloads selectively only when it does not fit the budget). The host link is
// memory.host_link_bytes_per_s, else the workers' measured bandwidth (PlannerOptions).
//
// Evaluation (eval.interval_steps > 0): plan.evaluation holds the validation plan,
// EvaluationPlan(planned, eval.batches).
absl::StatusOr<PlannedJob> PlanJob(const v1::JobSpec& spec, const PlannerOptions& options = {});

// The step's CPU work besides F, B and W of `spec` (its data_parallel replicas) planned on
// `num_stages` stages of an even layer split, at `options`' gradient-sum, optimizer and message
// rates (a message: the largest stage boundary's activation).
// Errors: the spec's model or split is invalid.
absl::StatusOr<schedule::StepCpuWork> StepCpuWorkOf(const v1::JobSpec& spec, int num_stages,
                                                    const PlannerOptions& options);

// The forward-only plan of a validation pass of `batches` microbatches on `training`'s placement
// (schedule/forward_only.h): transfers added, validated, simulated with the training costs'
// forward times (no activation is kept), the same layer split.
absl::StatusOr<v1::Plan> EvaluationPlan(const PlannedJob& training, int batches);

}  // namespace pipetrain::planner

#endif  // PIPETRAIN_PLANNER_PLANNER_H_
