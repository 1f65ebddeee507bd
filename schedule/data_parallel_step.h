// The step of d data-parallel replicas of one plan (docs/data_parallel.md): every replica runs
// the same schedule at the same pace, and after each stage's last weight-gradient action (W, or
// BW without a split backward) that stage's gradients are summed across the replicas over the
// worker links, overlapping whatever the worker still has to do. The sum of a stage carries its
// gradient bytes 2 (d - 1) times (the running sum down the d - 1 hops of the replica chain, then
// the complete sum from the last replica to the d - 1 others), each with the link latency:
//   allreduce_s(stage) = 2 (d - 1) (latency + gradient_bytes / bandwidth)
// and the step ends when the schedule's last action or the last stage's sum ends, whichever is
// later. A model, not a network simulation: it assumes the links of different stages do not slow
// each other (each worker's sums use its own links) and that the replicas start together.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_DATA_PARALLEL_STEP_H_
#define PIPETRAIN_SCHEDULE_DATA_PARALLEL_STEP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/schedule.h"
#include "schedule/sim_result.h"

namespace pipetrain::schedule {

// One stage's sum across `replicas` (0 for one replica).
double StageAllReduceSeconds(int64_t gradient_bytes, int replicas, double link_bytes_per_s,
                             double link_latency_s);

struct DataParallelStep {
  // Per stage: when its last weight-gradient action ends in `sim`, and when its sum ends.
  std::vector<double> last_weight_end;
  std::vector<double> allreduce_end;
  double step_s = 0;  // max(sim.makespan, every allreduce_end)
};

// `allreduce_s` per stage of `schedule` (simulated as `sim`). InvalidArgument if the sizes
// differ or a stage has no weight-gradient action.
absl::StatusOr<DataParallelStep> SimulateDataParallelStep(const Schedule& schedule,
                                                         const SimResult& sim,
                                                         const std::vector<double>& allreduce_s);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_DATA_PARALLEL_STEP_H_
