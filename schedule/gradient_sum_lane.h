// GradientSumLane: data parallelism's gradient sums (docs/data_parallel.md) as intervals to draw
// next to a timeline. Each stage's sum across the replicas starts after the stage's last
// weight-gradient action and overlaps whatever its worker still runs; the renderers (SVG Gantt
// chart, Chrome trace) show the sums as a lane of their own under each worker's row, so a
// predicted and a measured step show where the sums ran and how much of them the cool-down hid.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_GRADIENT_SUM_LANE_H_
#define PIPETRAIN_SCHEDULE_GRADIENT_SUM_LANE_H_

#include <vector>

#include "schedule/data_parallel_step.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// One stage's gradient sum on one worker, in the timeline's time unit.
struct GradientSumInterval {
  int worker = 0;  // the schedule's worker (pipeline rank) holding the stage
  int stage = 0;
  double start = 0;
  double end = 0;
};

// The predicted sums of SimulateDataParallelStep: stage s on its worker from its last
// weight-gradient action's end to the end of its sum.
std::vector<GradientSumInterval> PredictedGradientSums(const Schedule& schedule,
                                                       const DataParallelStep& step);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_GRADIENT_SUM_LANE_H_
