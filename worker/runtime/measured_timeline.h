// MeasuredTimeline: what actually ran, in the simulator's result type, so the same renderers
// (ASCII, SVG, Chrome trace) draw a measured step next to its simulated plan.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_WORKER_RUNTIME_MEASURED_TIMELINE_H_
#define PIPETRAIN_WORKER_RUNTIME_MEASURED_TIMELINE_H_

#include <vector>

#include "coordinator/schedule/schedule.h"
#include "coordinator/schedule/simulator.h"
#include "worker/runtime/executor.h"

namespace pipetrain::worker {

// `timings[w]` is worker w's timings for one step (empty for workers not measured here).
// Times become seconds since the earliest measured start. busy/span/makespan/bubble_ratio are
// computed as the simulator defines them; peak_memory is left empty (bytes are in StepResult).
schedule::SimResult MeasuredTimeline(const schedule::Schedule& schedule,
                                     const std::vector<std::vector<ActionTiming>>& timings);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_MEASURED_TIMELINE_H_
