// Passes: schedule -> schedule rewrites that run after a generator.
//
// AddTransfers makes every cross-worker hand-off explicit. Ordering rule: a SEND goes right
// after the compute that produces the tensor (SEND_F after F(s,i), SEND_B after B/BW(s,i)) and
// a RECV right before the compute that consumes it (RECV_F before F(s+1,i), RECV_B before
// B/BW(s-1,i)). Hand-offs between stages on the same worker (a V's turn, or interleaved chunks
// that happen to share a worker) get no transfer.
// Why this cannot deadlock (sends are non-blocking/buffered, as the simulator models them): a
// RECV's only dependency is its SEND, which has no dependency but the compute right before it,
// so the wait-for graph is the compute-only graph with each cross edge routed through two
// extra nodes; it has a cycle iff the input does. The pass validates its output, once (an
// invalid input gives an invalid output, so that check covers the input too), and with
// comm = c the output simulates to the same makespan as the input does with implicit comm c.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_PASSES_H_
#define PIPETRAIN_SCHEDULE_PASSES_H_

#include "absl/status/statusor.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// Input: a compute-only schedule (InvalidArgument if it already has transfers, or if the output
// fails ValidateSchedule). Output: the same schedule with SEND/RECV pairs inserted.
absl::StatusOr<Schedule> AddTransfers(const Schedule& schedule);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_PASSES_H_
