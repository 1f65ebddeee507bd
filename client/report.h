// Job report: one finished step of a job, predicted against measured, for `pipetrain report`.
//
// Predicted: the plan's schedule (Job.plan) simulated with the plan's own stage costs (seconds
// and bytes, plan.comm_s between workers), exactly as the coordinator predicted it.
// Measured: the step's per-rank action timings (GetStepTrace). Each rank's times are relative
// to its own step start; the timeline starts at the earliest measured action. The measured
// memory curve of a worker is the resident activation bytes the executor records after every
// compute, OFFLOAD and RELOAD action (ActionTiming.bytes): the level holds from the action's end
// until the next such action; it starts at 0 (the stash is empty between steps).
// Data parallelism (plan.data_parallel d > 1, d x p ranks in the trace): the timelines are
// replica 0's p ranks (every replica runs the same plan), and both charts get a lane of
// gradient sums under each worker: predicted, each stage's sum from its last weight-gradient
// action (schedule/data_parallel_step.h); measured, what each rank reported (GradientSum).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_CLIENT_REPORT_H_
#define PIPETRAIN_CLIENT_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/step_replay.h"
#include "pipetrain/v1/coordinator.pb.h"
#include "pipetrain/v1/plan.pb.h"
#include "schedule/gradient_sum_lane.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::client {

// Times in seconds, memory in bytes (SimResult's units fields hold bytes here).
struct JobReport {
  std::string job_id;
  int step = 0;
  schedule::Schedule schedule;
  schedule::SimResult predicted;
  schedule::SimResult measured;  // peak_memory and memory_curve from the recorded bytes
  // Data parallelism: the replicas, the step the plan expects (with the sums, on shared cores
  // when the coordinator simulated that; planner::ExpectedStepSeconds), and the sums of
  // replica 0's workers, predicted and measured (seconds on each timeline's clock).
  int replicas = 1;
  double expected_step_s = 0;
  std::vector<schedule::GradientSumInterval> predicted_sums;
  std::vector<schedule::GradientSumInterval> measured_sums;
  // The CPU time the shown ranks' threads spent in their actions (ActionTiming.cpu_ns), by group
  // (F, B, W, BW: next to the plan's time for the same actions; sends and receives: next to their
  // wall time, which also counts the waits). Empty when the trace holds no CPU times.
  struct CpuUse {
    std::string group;
    double cpu_s = 0, wall_s = 0, planned_s = 0;
    int actions = 0;
  };
  std::vector<CpuUse> cpu_use;
  // The step replayed with its own costs (client/step_replay.h), when asked for: the ranks
  // sharing `replay_host_cores` cores (0: a device per rank). `replay_note` says why there is
  // none when it was asked for and could not be made.
  std::optional<StepReplay> replay;
  double replay_host_cores = 0;
  std::string replay_note;
};

// The measured step of `trace` against `schedule`: trace.ranks[r] must hold one timing per
// action of worker r's list, in list order (InvalidArgument naming the rank and index if not).
// A data-parallel trace (ranks_size() = d x num_workers) gives replica 0's step.
absl::StatusOr<schedule::SimResult> MeasuredStep(const schedule::Schedule& schedule,
                                                 const v1::StepTrace& trace);

// `replay_host_cores` set: also the step replayed with its own costs, the ranks sharing that
// many cores of one host (0: a device per rank), each message costing them `message_cpu_s`.
absl::StatusOr<JobReport> BuildJobReport(const v1::Plan& plan, const v1::StepTrace& trace,
                                         std::optional<double> replay_host_cores = std::nullopt,
                                         double message_cpu_s = 0);

// One SVG: a summary, the predicted and the measured Gantt charts on one time scale (ms), and
// every worker's activation memory over the step, predicted (dashed) and measured (solid).
std::string RenderJobReportSvg(const JobReport& report);

// A few lines for the terminal: step time, bubble and peak memory per worker, both sides.
std::string FormatJobReport(const JobReport& report);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_REPORT_H_
