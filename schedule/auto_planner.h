// Memory-budget planner ("auto"): given the cost model and PipelineSpec.memory_limit (peak
// activation units per worker; 0 = unlimited), try every schedule family in the registry
// (V-shape: v-zb, zb-v, dualpipev, v-half, v-min and the adaptive V search under the limit; loop
// placement: 1f1b, zb-h1, zb-h2, interleaved-1f1b, gpipe), Simulate each, and return the one
// with the least simulated makespan whose simulated peak fits on every worker. When nothing
// fits: ResourceExhausted with the smallest achievable peak and the knobs that would help.
//
// Offload (PipeOffload): when the spec has a host link (offload_ratio > 0) and a memory limit,
// each schedule that generated is also tried with the offload pass (offload_pass.h): half and
// full, and selective under the limit when the schedule alone does not fit. Every such plan is
// a candidate row of its own (offload column) and competes on simulated makespan with the rest;
// at equal makespan the plan without offload (tried first) wins. The chosen plan's schedule
// then carries OFFLOAD/RELOAD actions.
//
// ExplainAuto returns the whole candidates table (for `pipetrain plan --explain`);
// ExplainChoice says in words why the chosen row won (or why nothing fits).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_AUTO_PLANNER_H_
#define PIPETRAIN_SCHEDULE_AUTO_PLANNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/pipeline_spec.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct PlanCandidate {
  std::string name;        // registry name
  bool generated = false;  // false: the generator refused the spec (see `error`)
  std::string error;
  double makespan = 0.0;  // simulated
  double bubble = 0.0;    // simulated per-stage bubble ratio (bubble.h)
  double step_bubble = 0.0;  // simulated step bubble: 1 - work / (workers x makespan)
  double peak = 0.0;      // simulated peak over workers (units)
  bool fits = false;      // generated and peak <= memory_limit (or no limit)
  bool chosen = false;
  std::string offload = "none";  // offload pass applied: none, half, full, selective
  int offloaded = 0;             // stashes offloaded (of `stashes`)
  int stashes = 0;
};

// Every candidate, in the order tried; exactly one has chosen = true when any fits.
std::vector<PlanCandidate> ExplainAuto(const PipelineSpec& spec);

// Fixed-width text table of ExplainAuto's result.
std::string FormatCandidates(const std::vector<PlanCandidate>& candidates);

// One paragraph: which row was chosen and why (fastest that fits; what was faster but did not
// fit; what offload cost or saved), or the smallest peak when nothing fits.
std::string ExplainChoice(const PipelineSpec& spec, const std::vector<PlanCandidate>& candidates);

// A lower bound on the simulated makespan of member `name`'s plan whenever auto could choose
// it; 0 when none is known (only members whose placement is fixed here: v-min's V, and the loop
// placement of 1f1b, zb-h1, zb-h2 and gpipe). It is m x the most ChainMemoryTime of a worker
// (cost_model.h) over the peak such a plan keeps within: the limit (a plan auto chooses fits
// it), and for v-min also its own cap (VPlanCap), which is what puts its bound above the others'
// plans at p = 64 (V-Min's 22 units against V-Half's 33). No bound when the spec has a host
// link (offload plans free activation before the B).
double ChoosableMakespanBound(const std::string& name, const PipelineSpec& spec);

// The registry's "auto" generator. It only needs the choice, so a member whose
// ChoosableMakespanBound is above a fitting member's simulated makespan is not generated (the
// same choice as ExplainAuto's; see TryAll in auto_planner.cc).
absl::StatusOr<Schedule> MakeAuto(const PipelineSpec& spec);

// Every candidate that fits, fastest simulated makespan first (ties in the order tried, so the
// first is MakeAuto's choice), named as MakeAuto names its choice. For callers that re-check
// each plan under a finer cost model than the spec's uniform one (the job planner: per-stage
// bytes and transfers) and take the first that still fits. Empty when nothing fits.
std::vector<Schedule> FittingAutoPlans(const PipelineSpec& spec);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_AUTO_PLANNER_H_
