// Simulate: event simulation of a schedule under a cost model. The one simulator; planners,
// renderers, the coordinator's predictions and the runtime comparison all use it.
//
// Each worker runs its list in order; an action starts when the worker is free and its inputs
// are ready. Compute-only schedules (no SEND/RECV actions) pay `comm` between stages on
// different workers implicitly; with explicit transfers a SEND costs no worker time and its
// message arrives `comm` later, and a RECV waits for the arrival. Memory follows the model in
// cost_model.h. If no worker can make progress the result is FailedPrecondition describing
// what each worker is blocked on.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_SIMULATOR_H_
#define PIPETRAIN_SCHEDULE_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct TimedAction {
  Action action;
  int worker = 0;
  double start = 0.0;
  double end = 0.0;
};

struct MemoryPoint {
  double time = 0.0;
  double units = 0.0;  // activation memory held on the worker from `time` on
};

struct SimResult {
  double makespan = 0.0;              // last end - first start over all workers
  std::vector<double> busy;           // per worker: summed compute time
  std::vector<double> span;           // per worker: last end - first start
  // Idle share of the busiest worker's span: 1 - busy[w] / max span, w the worker with the most
  // busy time (= 1 - m(F+B+W)/longest span with per-worker costs summed).
  double bubble_ratio = 0.0;
  std::vector<double> peak_memory;    // per worker, units (see cost_model.h)
  std::vector<std::vector<MemoryPoint>> memory_curve;  // per worker, step function
  std::vector<TimedAction> timeline;  // every action, ordered by (worker, list position)
};

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const CostModel& costs);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SIMULATOR_H_
