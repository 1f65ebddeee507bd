// SimResult: what simulating a schedule predicts -- step time, bubble, per-worker busy time and
// activation memory over time, and every action's start and end. Produced by Simulate
// (simulator.h); read by planners, renderers and the coordinator's predictions.
//
// Thread-safety: value types.
#ifndef PIPETRAIN_SCHEDULE_SIM_RESULT_H_
#define PIPETRAIN_SCHEDULE_SIM_RESULT_H_

#include <algorithm>
#include <vector>

#include "schedule/action.h"

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
  // The per-stage bubble (the papers' number): idle share of the busiest worker's span,
  // 1 - busy[w] / max span, w the worker with the most busy time, each span counted from that
  // worker's own first action (= 1 - m(F+B+W)/longest span with per-worker costs summed).
  double bubble_ratio = 0.0;
  // The step bubble (what a user loses): 1 - sum of busy / (p x makespan). See bubble.h.
  double step_bubble_ratio = 0.0;
  std::vector<double> peak_memory;    // per worker, units (see cost_model.h)
  std::vector<std::vector<MemoryPoint>> memory_curve;  // per worker, step function
  std::vector<TimedAction> timeline;  // every action, ordered by (worker, list position)
};

// The highest activation peak over the workers (0 with no workers).
inline double MaxPeak(const SimResult& r) {
  return r.peak_memory.empty() ? 0.0
                               : *std::max_element(r.peak_memory.begin(), r.peak_memory.end());
}

// The longest worker span (0 with no workers).
inline double LongestSpan(const SimResult& r) {
  return r.span.empty() ? 0.0 : *std::max_element(r.span.begin(), r.span.end());
}

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SIM_RESULT_H_
