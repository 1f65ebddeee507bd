// Forward-only schedules: the plans of validation passes (docs/training.md, "Evaluation").
//
// A validation pass runs F alone, on the training plan's placement: every worker runs the F of
// its stages for every validation microbatch, and nothing is kept for a backward. The order is
// the wavefront: on each worker, F(s, i) sorted by s + i (the earliest time it can start with
// unit costs), ties broken by the later stage first (it finishes an older microbatch). Every
// dependency of F(s, i) is F(s - 1, i), whose key is smaller, so no order on any worker waits
// for something behind it: the schedule cannot deadlock, for any placement. On a loop placement
// with one stage per worker this is GPipe's forward phase.
//
// The plan goes through the same machinery as a training plan: AddTransfers (activation
// transfers only), ValidateSchedule (which checks the forward-only rules) and Simulate with
// ForwardOnlyCosts.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_FORWARD_ONLY_H_
#define PIPETRAIN_SCHEDULE_FORWARD_ONLY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// Name of every forward-only plan (Schedule::name).
inline constexpr char kForwardOnlyName[] = "forward-only";

// The compute-only forward schedule of `num_microbatches` microbatches over `stage_to_worker`
// (the training plan's placement), validated. InvalidArgument for a bad placement or count.
absl::StatusOr<Schedule> MakeForwardOnly(int num_workers, const std::vector<int>& stage_to_worker,
                                         int num_microbatches);

// The training plan's per-stage costs as a forward-only pass pays them: the same F time and
// transfer time, no backward time, and no activation held after an F (its stash is dropped at
// once), so the simulated peak activation memory is 0.
CostModel ForwardOnlyCosts(const CostModel& training);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_FORWARD_ONLY_H_
