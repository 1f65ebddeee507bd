// PolishOrder: local search that shortens a compute-only schedule under a memory cap.
//
// A generator's plan comes from rules (greedy priorities, repeated blocks); around the warm-up
// and cool-down, and with transfer costs, the rules leave idle time a different order would
// fill. This pass improves the order directly, in the way job-shop local search does: it times
// the schedule ASAP (as Simulate does), walks the critical path back from the end of the longest
// worker span, and where an action on that path waited for its worker (not for its data) it
// tries moving the action earlier, or the action that held it up later, by a few places on that
// worker. A move is kept when the order still runs (no deadlock), every worker's peak stays
// within `memory_cap`, and the longest worker span falls (ties: the sum of all actions' end
// times falls, which lets the search walk plateaus of the longest span: work moved earlier
// anywhere makes room on the critical path later). A descent ends when no move on the critical
// path helps; then the best order so far is kicked (a few random swaps near the ends of the
// worker lists, where warm-up and cool-down leave room) and descended again, `kicks` times
// (fewer once `stale_kicks` in a row found nothing) or until the work budget (actions timed) is
// spent. The random stream has a fixed seed, so the result is deterministic; it is never worse
// than the input. A trial re-times only what follows the moved actions (what started before
// them keeps its time), so the budget counts the actions actually re-timed.
//
// Any placement; F, B, W and BW actions only (the generators' output before transfers are
// added). Memory model of cost_model.h.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_ORDER_POLISH_H_
#define PIPETRAIN_SCHEDULE_ORDER_POLISH_H_

#include <cstdint>

#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct PolishOptions {
  double memory_cap = 1e300;  // per worker, units
  int max_shift = 2;          // places a move may shift one action
  int64_t work_budget = 8'000'000;  // actions timed over the whole search (~60 ms)
  // Moves and kicks touch only actions within `edge` places of either end of a worker's list
  // (0 = anywhere): warm-up and cool-down, where rules leave room; a repeated steady state is
  // tight, and trying moves all along it costs a full timing each.
  int edge = 0;
  // Iterated local search: restarts from the best order kicked by `kick_swaps` random adjacent
  // swaps.
  int kicks = 128;
  // Stop after this many kicks in a row found nothing better (a quarter of it while nothing has
  // shortened the longest span yet: such an order is usually tight already).
  int stale_kicks = 32;
  int kick_swaps = 8;
};

struct PolishResult {
  Schedule schedule;
  double max_span = 0.0;  // longest worker span after polishing
  int moves = 0;          // moves kept
  int64_t work = 0;       // actions timed
};

// `schedule` must run (no deadlock) and fit `memory_cap`; otherwise it is returned unchanged.
PolishResult PolishOrder(const Schedule& schedule, const CostModel& costs,
                         const PolishOptions& options);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_ORDER_POLISH_H_
