// ZB-V wave scheduler (the algorithm of the authors' reference implementation) re-derived for
// pipetrain's cost model: REAL per-stage F/B/W costs (each of the 2p V stages its own), comm
// between workers, and the memory model of cost_model.h (F allocates, B frees freed_by_b, W the
// rest) under a per-worker cap in units.
//
// Phases (worker i holds stage i = chunk 0 and stage 2p-1-i = chunk 1):
//   1. warm-up: chunk-0 F's while they fit the cap (with room kept for the chunk-1 F's that
//      follow) and end before the first chunk-1 F arrives from worker i+1; then chunk-1 F's are
//      added in alternating waves until every worker is one step behind its upstream;
//   2. steady state, 2m rounds of one B per worker: first the upward backward (chunk 0) on
//      workers from high to low, then the downward one (chunk 1) from low to high; then one F
//      per worker (chunk 1 when its input is there, else chunk 0). W's are LAZY: a W runs only
//      when memory requires it, when it fits entirely into the gap before the next pass's input
//      arrives, or when that gap exceeds the worker's "approved bubble" (fill_b / fill_f say
//      whether the last rule applies before downward B's / F's). The backlog of W's is what
//      fills the cool-down, which is why this reaches ~0 bubble where an eager greedy does not;
//   3. the remaining W's.
// Refinement: a schedule's per-worker idle time becomes the next run's approved bubble (a worker
// may idle as much as the worst one does anyway), repeated while the worst idle time shrinks;
// the four fill_b x fill_f variants each get that loop; the least longest worker span wins.
//
// Every returned order is feasible: dependencies placed before use, peak <= cap; the times are
// ASAP for the order (what Simulate computes). A run that would break either (possible for caps
// far below p units or unusual costs) is dropped; NotFound when all are.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_V_ZBV_H_
#define PIPETRAIN_SCHEDULE_V_ZBV_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct ZbvOptions {
  double memory_cap = 0.0;  // units per worker
  bool fill_b = true;       // extra W before a downward B when the gap exceeds the approved bubble
  bool fill_f = true;       // the same before an F
  int max_refinements = 12;
  // Slack of the time comparisons (a W fits a gap, an F ends before an arrival, a refinement
  // shrank the idle time); 0 = the authors' exact comparisons.
  double tolerance = 1e-9;
};

struct ZbvResult {
  Schedule schedule;
  double max_span = 0.0;  // longest worker span (first start to last end)
  double makespan = 0.0;
  std::vector<double> peak;  // per worker
  std::vector<double> idle;  // per worker, idle time after its first F
  std::string variant;
  // A run without approved budgets that the first refinement (approved = idle) would repeat
  // exactly, action for action (checked during the run; ZbvSchedule then skips that refinement).
  bool refines_to_itself = false;
};

// One run with fixed fill flags; `approved` (per worker idle budget, empty = none).
absl::StatusOr<ZbvResult> ZbvTry(int num_workers, int num_microbatches, const CostModel& costs,
                                 const ZbvOptions& options, const std::vector<double>& approved,
                                 const std::string& name);

// The full search: fill_b x fill_f, each with the approved-bubble refinement loop; up to
// p x m = 4096 also with the authors' exact comparisons, every variant at full m (so the
// authors' own ZB-V order is a candidate there).
absl::StatusOr<ZbvResult> ZbvSchedule(int num_workers, int num_microbatches, const CostModel& costs,
                                      double memory_cap, const std::string& name);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_ZBV_H_
