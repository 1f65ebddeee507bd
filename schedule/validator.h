// ValidateSchedule: the one place that decides whether a schedule is a correct pipeline program.
// Every generator, every pass, the coordinator before dispatch and the worker before running
// call it; nothing else re-implements these rules.
//
// Checks: shape (counts, placement size, every stage on a valid worker, every action's stage
// and microbatch in range, each action in the list of the worker that owns its stage);
// completeness (every (stage, microbatch) has exactly one F and exactly one backward: B + W, or
// BW); order on each worker (B before W; F before its backward); cross-stage dependencies are
// satisfiable (checked by a dependency-only dry run, so a cycle across workers is reported);
// transfers (each SEND matched by exactly one RECV on the peer stage's worker, none between
// stages on the same worker, sends after the producing compute, recvs before the consuming
// compute, no transfer of a stage edge that does not exist) and offload (OFFLOAD after F and
// before the backward, RELOAD after OFFLOAD and before the backward, at most one each).
// A forward-only schedule (Schedule::forward_only, forward_only.h) needs exactly one F per
// (stage, microbatch) and may hold no backward, gradient transfer or offload action.
//
// Errors are InvalidArgument (or FailedPrecondition for deadlock) whose message names the
// offending action and ends with the step x worker grid, the failing cell marked.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_VALIDATOR_H_
#define PIPETRAIN_SCHEDULE_VALIDATOR_H_

#include "absl/status/status.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

absl::Status ValidateSchedule(const Schedule& schedule);

// The same decision and message through the rule-by-rule checks alone. ValidateSchedule first
// tries a one-pass check (an untimed engine run, one byte per (stage, microbatch)) that accepts
// exactly the valid schedules without OFFLOAD/RELOAD, and falls back to this for anything it does
// not accept. Exposed so tests can hold the two to the same answer.
absl::Status ValidateScheduleFull(const Schedule& schedule);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_VALIDATOR_H_
