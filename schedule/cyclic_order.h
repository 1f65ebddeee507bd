// CyclicOrder: a schedule's steady state as each worker's cyclic order of the passes of K
// microbatches, and a search that shortens its period under a memory cap.
//
// Why: a repeated one-microbatch block (building_block.h) can be too rigid. With transfer costs
// the chain of a microbatch is long, and under a tight cap no single block repeats as fast as
// the workers could go; two microbatches per period interleaved unevenly can (1:1.5:0.5, comm
// 0.2, p=4 at V-Half's cap of 3 units: one block needs 3.4 per microbatch, 1F1B's steady state
// 3.3, two microbatches per period 3.2-3.275).
//
// The model, exact for a fixed order: position k of worker w holds pass (kind, stage, slot) of
// microbatch K*(lap + r) + slot in repetition r. The steady state of running the unrolled order
// ASAP repeats every P, the least period for which times t (one per pass) exist with
//   t[next] >= t[prev] + duration(prev) - h * P   for consecutive passes on a worker
//                                                  (h: lap difference, +1 across the cycle's end)
//   t[consumer] >= t[producer] + duration + comm   for the microbatch's data dependencies,
// i.e. no cycle of positive weight: a longest-path (Bellman-Ford) test per P, bisected. Memory
// depends on the order alone: a worker's level at the cycle start counts the instances between
// F and B ((lap F - lap B) of them) and between B and W, then follows the order.
//
// The search (ShortenPeriod) is simulated annealing over the orders: swap neighbours (also across
// the cycle's end) and move a pass to the next or previous lap; a candidate over the cap is
// dropped; otherwise it is accepted when it runs at the current period plus a random slack that
// cools to zero (one feasibility test), and its exact period is then bisected. Fixed seed:
// deterministic.
//
// F, B and W actions only (no BW), any placement.
//
// Thread-safety: value types and pure functions.
#ifndef PIPETRAIN_SCHEDULE_CYCLIC_ORDER_H_
#define PIPETRAIN_SCHEDULE_CYCLIC_ORDER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "schedule/action.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct CyclicPass {
  ActionKind kind = ActionKind::kF;  // kF, kB or kW
  int stage = 0;
  int slot = 0;  // microbatch modulo K
  int lap = 0;   // the instance at this position in repetition r is microbatch K*(lap+r)+slot
};

struct CyclicOrder {
  int microbatches = 1;  // K: microbatches per period
  std::vector<std::vector<CyclicPass>> workers;
};

// The cyclic order of K microbatches read from `schedule`'s lists: on each worker, the
// 3 * (its stages) * K consecutive actions from the middle of its list. Nullopt when some
// worker's window does not hold each (kind, stage, slot) exactly once (no steady state there),
// or the schedule has other than F, B and W actions.
std::optional<CyclicOrder> SteadyWindow(const Schedule& schedule, int microbatches);

// The order repeated over microbatches 0..num_microbatches-1 (instances out of range dropped),
// with `shape`'s placement and name. Runs whenever the order has a finite period.
Schedule Unroll(const CyclicOrder& order, const Schedule& shape, int num_microbatches);

// Least steady-state period (time per K microbatches) of `order`; +inf when it deadlocks or is
// not a cyclic order of every F, B and W of K microbatches.
double CyclicPeriod(const CyclicOrder& order, const Schedule& shape, const CostModel& costs);

// Peak activation memory of each worker in the steady state (units). `order` must hold F, B and
// W passes only, each once (as SteadyWindow and ShortenPeriod give).
std::vector<double> CyclicPeaks(const CyclicOrder& order, const Schedule& shape,
                                const CostModel& costs);

struct CyclicSearchOptions {
  double memory_cap = 1e300;  // per worker, units
  int iterations = 6000;
  int64_t work_budget = 40'000'000;  // edge relaxations over the whole search
  double temperature = 0.012;        // initial slack, as a share of the start period
};

struct CyclicSearchResult {
  CyclicOrder order;          // the best order found (the start when nothing was better)
  double period = 0.0;        // its period
  double start_period = 0.0;  // the start's period (+inf when it deadlocks or exceeds the cap)
  int64_t work = 0;           // edge relaxations spent
};

CyclicSearchResult ShortenPeriod(const CyclicOrder& start, const Schedule& shape,
                                 const CostModel& costs, const CyclicSearchOptions& options);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_CYCLIC_ORDER_H_
