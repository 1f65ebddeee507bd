// MeasuredTimeline: what actually ran, in the simulator's result type, so the same renderers
// (ASCII, SVG, Chrome trace) draw a measured step next to its simulated plan. Used by the worker
// (per-step traces of a plan-file run) and the client (`pipetrain trace`, `pipetrain report`).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_MEASURED_TIMELINE_H_
#define PIPETRAIN_SCHEDULE_MEASURED_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "schedule/action.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

// One executed action as a worker measured it.
struct MeasuredAction {
  Action action;
  int64_t start_ns = 0;  // since the worker's step start
  int64_t end_ns = 0;
  int64_t bytes = 0;     // bytes sent/received (transfers) or stored after the action (compute)
  // CPU time of the executing thread during the action: below the wall time by what the thread
  // spent waiting (for a message, or for a core it shares with other workers).
  int64_t cpu_ns = 0;
};

// `timings[w]` is worker w's timings for one step (empty for workers not measured). Each worker
// measures from its own step start, so the workers' tracks are aligned at their step starts.
// Times become seconds since the earliest measured start. busy/span/makespan/bubble_ratio are
// computed as the simulator defines them; peak_memory is left empty (bytes are in the reports).
SimResult MeasuredTimeline(const Schedule& schedule,
                           const std::vector<std::vector<MeasuredAction>>& timings);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_MEASURED_TIMELINE_H_
