// ListScheduleV: turns a V-shape building block into a full schedule for m microbatches by
// list scheduling with the REAL costs, under a per-worker activation-memory cap.
//
// Each worker, whenever it is free, runs the ready pass with the earliest nominal time in the
// repeated block (block offset + mb * interval). In the steady state this follows the block
// order (the repeated block, squeezed); in warm-up and cool-down passes whose inputs are ready
// early move ahead of ones that are not, which is the paper's warm-up/cool-down reordering, and
// it is done with real F/B/W costs and comm rather than unit slots. Memory is counted as the
// simulator does (cost_model.h) and never exceeds `memory_cap`.
//
// Deadlock freedom under a cap: F, B and W of a stage run in microbatch order; a worker starts a
// chunk-0 forward only if afterwards either its chunk-1 forward still fits or memory held by
// microbatches past their chunk-1 forward will be released. Then the oldest unfinished
// microbatch can always advance, for any cap >= one microbatch's activation on every worker.
//
// The returned times are the planner's own estimate (never later than Simulate's ASAP times
// for the same order); Simulate remains the authority.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COORDINATOR_SCHEDULE_V_LIST_SCHEDULER_H_
#define PIPETRAIN_COORDINATOR_SCHEDULE_V_LIST_SCHEDULER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/schedule/building_block.h"
#include "coordinator/schedule/cost_model.h"
#include "coordinator/schedule/schedule.h"

namespace pipetrain::schedule {

enum class VPriority {
  kBlock,          // earliest nominal time in the repeated block
  kBackwardFirst,  // B, then chunk-1 F, then chunk-0 F, then W; older microbatch first (ZB-V)
};

struct VListOptions {
  double memory_cap = 0.0;  // units per worker (> 0)
  VPriority priority = VPriority::kBlock;
  // false: run the most urgent READY pass (greedy; fills every gap, W's included).
  // true: when the most urgent pass is not ready yet, run another pass only if it ends before
  // that one's input can arrive (never delays the urgent pass; kBlock priority only waits,
  // type priorities fall back to greedy when the arrival is still unknown).
  bool conservative = false;
  // Run exactly the repeated block's order (RepeatBlock), only squeezed: no reordering. The
  // cap is then not enforced while planning; a result above it fails with ResourceExhausted.
  bool strict_order = false;
};

struct VListResult {
  Schedule schedule;
  double makespan = 0.0;     // planner's estimate
  std::vector<double> peak;  // per worker, exact (memory depends on order only)
};

// `block` must come from MakeVBlock(p, costs, ...); `costs` has 2p stages. Fails with
// InvalidArgument when the cap is below one microbatch's activation on some worker.
absl::StatusOr<VListResult> ListScheduleV(int num_workers, int num_microbatches,
                                          const CostModel& costs, const BuildingBlock& block,
                                          const VListOptions& options, std::string name);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_COORDINATOR_SCHEDULE_V_LIST_SCHEDULER_H_
