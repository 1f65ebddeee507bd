// PlanBestV: the V generators' choice among their candidate plans (v_generators.h builds the
// candidates; this file only ranks and runs them).
//
// A candidate is one of the authors' fixed patterns (v_pattern.h), a greedy engine variant
// (v_greedy.h) or a repeated building block (building_block.h: fixed shapes, searched or
// modulo-scheduled blocks). Each is timed with the real costs (EvaluateVOrder or the greedy
// engine's own times) and kept only when its peak fits the cap on every worker; the best is the
// least longest worker span, then the least makespan.
//
// Why a file of its own: running every candidate at full m is what generation time is made of
// (at p = 64, m = 1024 one full-m run is 5-25 ms), so the choice is staged:
//   1. screening (m > max(2p, 24)): every candidate on a 2p-microbatch prefix, promising ones
//      first, each stopped once it is certain to lose (the steady state is periodic, so the
//      prefix ranking carries over);
//   2. finalists: the best two, the best greedy and the best repeated block, the patterns (of a
//      pattern and its reordered variant the one screened faster) and the plain greedy as a
//      fallback that always fits; each gets a predicted full-m span (periodic candidates: from
//      two prefixes; greedy: optimistic, no bubble past the prefix);
//   3. full m, best predicted first, each run stopped once it cannot beat the best so far;
//      finalists predicted worse than the best so far by more than one microbatch of the
//      busiest worker's work are skipped.
// The caller may pass `beat_span` (a plan it already has, e.g. the ZB-V wave): candidates that
// cannot beat it are stopped or skipped the same way.
//
// Thread-safety: pure functions (PlanBestV may time two finalists at once on a thread of its own).
#ifndef PIPETRAIN_SCHEDULE_V_FINALISTS_H_
#define PIPETRAIN_SCHEDULE_V_FINALISTS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/building_block.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/v_greedy.h"
#include "schedule/v_pattern.h"

namespace pipetrain::schedule {

// One point of the greedy engine's search (v_greedy.h); memory_cap is set by the caller.
struct VVariant {
  std::string label;
  VGreedyOptions options;
  int inflight = 0;  // max_inflight on every worker; 0 = memory only
  // When set, the candidate is instead the repeated real-cost building block of this shape
  // (building_block.h: MakeVBlock + RepeatBlock, squeezed by ASAP timing), kept if it fits.
  std::optional<VBlockShape> block;
  // When set, the candidate is this searched block (v_block_search.h), repeated.
  std::optional<BuildingBlock> fixed_block;
};

struct VPlan {
  Schedule schedule;
  double max_span = 0.0;  // longest worker span (the bubble's denominator)
  double makespan = 0.0;
  std::vector<double> peak;  // per worker
  std::string variant;       // label of the winning candidate
};

// A fixed pattern the caller already timed at the full m (PlanBestV then takes this result
// instead of timing it again: at p = 64, m = 1024 one timing is ~5 ms).
struct TimedPattern {
  VPatternKind kind = VPatternKind::kHalf;
  std::optional<VPlan> plan;  // nullopt: it does not fit the cap (or deadlocks)
};

// A fixed pattern the caller already ran on the screening prefix (VScreenMicrobatches; see
// VPatternToRun): PlanBestV's screening takes it instead of running the pattern again.
struct ScreenedPattern {
  VPatternKind kind = VPatternKind::kHalf;
  bool fits = false;  // within the cap (and no deadlock); span and makespan are then set
  double span = 0.0, makespan = 0.0;
};

// Best candidate (least longest worker span, then makespan) with peak <= cap on every worker:
// the fixed `patterns` (v_pattern.h, real-cost timed) and the greedy `variants`. Candidates
// whose longest worker span is certain to exceed `beat_span` (or the best so far) are stopped
// early and never returned (error when none is left).
// `close_second`, if given: the best full-m plan of another candidate whose span is within
// 2% of the winner's (the caller polishes both: the polish can reorder their ranking).
// `later`, if given, gives more variants (appended to `variants`), called once: after the
// others are screened where PlanBestV screens (so a search that takes long, the modulo blocks'
// 33 ms at p = 64, m = 1024, can run meanwhile on a thread of the caller's), else first. The
// plan is the same as with its variants passed in `variants`.
absl::StatusOr<VPlan> PlanBestV(int num_workers, int num_microbatches, const CostModel& costs,
                                double cap, const std::vector<VPatternKind>& patterns,
                                std::vector<VVariant> variants, const std::string& name,
                                double beat_span = 1e300,
                                std::optional<VPlan>* close_second = nullptr,
                                std::vector<TimedPattern> timed = {},
                                const std::vector<ScreenedPattern>& screened = {},
                                const std::function<std::vector<VVariant>()>& later = {});

// The prefix PlanBestV screens its candidates on (when m is larger): 2p microbatches, at least 24.
int VScreenMicrobatches(int num_workers);

// Of `kind` and its reordered partner (when `patterns` holds both), the one PlanBestV runs at
// full m: the one whose span on the screening prefix is shorter (ties: the one listed first).
// Without the partner in `patterns`, or where PlanBestV does not screen (m <= the prefix):
// `kind`. Lets a caller time that pattern at full m once, for PlanBestV's `timed`; the two
// screening runs are appended to `screened`, for PlanBestV's.
VPatternKind VPatternToRun(VPatternKind kind, const std::vector<VPatternKind>& patterns, int p,
                           int m, const CostModel& costs, double cap, const std::string& name,
                           std::vector<ScreenedPattern>* screened);

// The candidate label of a fixed pattern ("pattern v-half", ...).
const char* VPatternLabel(VPatternKind kind);

// The busiest worker's work (F + B + W of both its stages) per microbatch: the least time per
// microbatch any V schedule can reach.
double VBusiestWork(const CostModel& costs, int num_workers);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_FINALISTS_H_
