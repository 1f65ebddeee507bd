// The authors' fixed V-Min / V-Half "stable pattern" (from their reference implementation) as a
// candidate for pipetrain's V generators, plus a fast evaluator of any V order.
//
// Pattern: 6 unit slots per microbatch; stage-pair i (worker i) puts F of chunk 0, F of chunk
// 1, B of chunk 1 (going down the workers) and B of chunk 0 (going up) at fixed slot offsets,
// microbatch k shifted by 6k; every empty slot then takes the oldest pending W, leftovers go at
// the end. The order is kept; timing is real-cost ASAP (EvaluateVOrder / Simulate), so unequal
// costs stretch it (the reason the generators also run the greedy engine, v_greedy.h).
//   V-Min:  d = 2 if p%3==0 else 0; [i, 2p-1-i, 2p+d+i, 4p+d-1-i]
//   V-Half: d = 3 if p%2==0 else 0; [2i, 3p-2-i, 3p+d+2i-1, 6p+d-2-i]
// kMinReordered / kHalfReordered add the authors' two reorder passes:
// in the warm-up (slots before worker 0's first chunk-0 B; first pass only) and the cool-down
// (after worker 0's last chunk-0 F) each pass, visited in slot order, moves to the earliest free
// slot after its dependencies where the worker's peak stays at the pattern's peak; the second pass
// runs without W's (counted where they would fill empty slots), then the W's are re-filled per
// chunk (chunk 0's first).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_V_PATTERN_H_
#define PIPETRAIN_SCHEDULE_V_PATTERN_H_

#include <string>
#include <vector>

#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

enum class VPatternKind { kMin, kHalf, kMinReordered, kHalfReordered };

// The pattern's order for p >= 2 workers and m >= 1 microbatches (VPlacement, F/B/W only).
Schedule MakeVPattern(VPatternKind kind, int num_workers, int num_microbatches, std::string name);

struct VOrderEval {
  bool ok = false;        // false: the order deadlocks
  double max_span = 0.0;  // longest worker span (first start to last end)
  double makespan = 0.0;
  std::vector<double> peak;  // per worker (memory model of cost_model.h)
  bool pruned = false;       // stopped early (see the limits below); ok is false then
};

// ASAP timing of a compute-only V schedule (2p stages, VPlacement) with real costs and comm,
// exactly as Simulate times it; O(actions). For ranking candidates inside the generators.
// Limits for candidate searches: stop (pruned = true, ok = false) as soon as a worker's memory
// exceeds `memory_cap` (+1e-9), or the longest worker span is certain to exceed `abort_span`.
VOrderEval EvaluateVOrder(const Schedule& schedule, const CostModel& costs,
                          double memory_cap = 1e300, double abort_span = 1e300);

// The per-worker peaks EvaluateVOrder would report for `schedule` (its running sums, in list
// order: a worker's memory does not depend on the times), without timing it; O(actions) with
// a few operations each. Also whether every running sum stays within `memory_cap` + 1e-9 (else
// EvaluateVOrder with that cap stops, pruned).
struct VOrderPeaks {
  std::vector<double> peak;
  bool within_cap = true;
};
VOrderPeaks PeaksOfVOrder(const Schedule& schedule, const CostModel& costs, double memory_cap);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_PATTERN_H_
