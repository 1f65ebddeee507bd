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

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/sim_result.h"

namespace pipetrain::schedule {

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const CostModel& costs);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SIMULATOR_H_
