// GreedyScheduleV: the V-shape planning engine. A memory-capped greedy list scheduler over
// simulated time with the REAL per-stage F/B/W costs and comm (any F:B:W ratio, any p, m).
//
// Each worker, whenever it is free, picks among its ready passes (O(1) per decision):
//   1. a B (critical path; it also enables a W): older microbatch first, or upward chunk first;
//   2. an F that continues an in-flight microbatch (chunk 1) before one that starts a new
//      microbatch (chunk 0), or the reverse (option);
//   3. a W, to fill an idle gap or to free memory for a blocked F.
// A W is not started when a B or F arrives (known arrival) within `idle_budget` x W before the
// W would end: waiting a little is then cheaper than delaying the critical path (the authors'
// "approved bubble"). During warm-up the cap is used fully for early forwards; in cool-down
// only B's and W's remain and W's fill the gaps.
//
// Admission control (deadlock freedom under any cap >= one microbatch on every worker): a
// chunk-0 F (a new microbatch on this worker) starts only if afterwards either a chunk-1 F still
// fits, or memory held by microbatches past their chunk-1 F (which only needs B's and W's to be
// released) covers one chunk-1 activation. F, B, W of a stage run in microbatch order, so the
// oldest unfinished microbatch can always advance. `max_inflight` (optional) further limits
// chunk-0 F's ahead of chunk-0 B's on a worker, shaping the warm-up.
//
// The returned times are the engine's own (each pass starts when its worker is free and its
// input has arrived), i.e. exactly what Simulate computes for the emitted order.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_V_GREEDY_H_
#define PIPETRAIN_SCHEDULE_V_GREEDY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct VGreedyOptions {
  double memory_cap = 0.0;    // units per worker (>= one microbatch on every worker)
  bool b_older_first = true;  // ready B's: older microbatch first; false: chunk-0 (upward) first
  bool f1_first = true;       // ready F's: chunk 1 (finish in-flight) before chunk 0 (new)
  // A ready chunk-1 F goes before B's: it is short and on the way to the V's end, so delaying
  // it lengthens every in-flight microbatch's lifespan (memory) when B is expensive.
  bool f1_over_b = false;
  // Wait instead of starting a W when a B/F arrives less than idle_budget x W-cost before the W
  // would end. 0 = pure greedy (never idle while a W is pending).
  double idle_budget = 0.0;
  // Lazy W's: while a worker still has forwards to run, it keeps at least
  // w_reserve x 2(p-1-w) W's pending (unless memory forces one): the cool-down gap on worker w
  // (its last B's travel to the tip and back) is then filled with them instead of idling.
  double w_reserve = 0.0;
  // Pacing: microbatch j may enter stage 0 no earlier than (j - front_load) x release_period
  // (0 = no pacing). A steady inflow one microbatch per period, after a burst of front_load
  // microbatches that fills the warm-up, avoids the bursty "waves" a pure greedy falls into.
  double release_period = 0.0;
  int front_load = 0;
  // Per worker w: chunk-0 F's ahead of chunk-0 B's at most max_inflight[w]; empty = no limit.
  std::vector<int> max_inflight;
  // Pruning (for candidate searches): stop as soon as the longest worker span is certain to
  // exceed abort_span (a worker's span so far plus its remaining work), returning pruned = true
  // and no schedule. kInf-like default = never.
  double abort_span = 1e300;
  // A heuristic stop, not a bound (for candidate searches at large m): when 3/8 of the passes are
  // committed, each worker's span is extrapolated from its own pace since 1/4 were (the work it
  // committed per unit of time then) over its remaining work, with no cool-down; a run whose
  // longest extrapolated span passes trend_abort_span stops (pruned = true), as for abort_span.
  double trend_abort_span = 1e300;
  // When set, called once at the trend stop's moment (3/8 of the passes committed), before the
  // trend is checked: it may lower *abort_span and set *trend_abort_span then, for a caller that
  // learns its bounds while the run goes (from a run on another thread). The run ends as it
  // would have with those bounds from the start (a worker already past the new abort_span
  // stops it there: its span so far plus its remaining work only grows). false: stop (pruned).
  std::function<bool(double* abort_span, double* trend_abort_span)> late_limits;
  // false: do not materialise the actions (schedule stays empty; spans and peaks are exact).
  bool record = true;
};

struct VGreedyResult {
  Schedule schedule;
  double max_span = 0.0;     // longest worker span (first start to last end)
  double makespan = 0.0;     // last end over all workers (first start is 0)
  std::vector<double> peak;  // per worker, exact
  bool pruned = false;       // stopped early: max_span > options.abort_span (or by the trend)
};

// `costs` has 2p stages (VPlacement). InvalidArgument when the cap is below one microbatch on a
// worker; Internal if the engine stalls (not expected; callers keep other candidates).
absl::StatusOr<VGreedyResult> GreedyScheduleV(int num_workers, int num_microbatches,
                                              const CostModel& costs, const VGreedyOptions& options,
                                              std::string name);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_GREEDY_H_
