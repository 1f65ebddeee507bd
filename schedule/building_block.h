// BuildingBlock: the passes of ONE microbatch (F, B and W of every stage) laid out in time, the
// unit from which "Pipeline Parallelism with Controllable Memory" (arXiv 2405.15362) builds schedules.
// A schedule repeats the block every `interval` (microbatch k's pass sits at offset + k*interval),
// squeezes out idle time without reordering, and may reorder warm-up and cool-down.
//
// Memory law (the paper's lifespan bound): a worker holds at most
//   sum over its stages s of ceil(lifespan_s / interval) * activation_s
// where lifespan_s = end of W(s) - start of F(s) in the block. Peak memory depends only on each
// worker's ORDER of actions (never on timing), so the bound holds for the repeated block however
// it is squeezed; RepeatBlock + Simulate demonstrates it.
//
// Thread-safety: value types and pure functions.
#ifndef PIPETRAIN_SCHEDULE_BUILDING_BLOCK_H_
#define PIPETRAIN_SCHEDULE_BUILDING_BLOCK_H_

#include <string>
#include <vector>

#include "schedule/action.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// One pass of the block. `chain` is the pass's position along the microbatch's dependency chain
// (F of stage 0 first, ... B of stage 0, then the W's); it breaks ties in a stable,
// dependency-respecting way.
struct BlockPass {
  ActionKind kind = ActionKind::kF;  // kF, kB or kW
  int stage = 0;
  double offset = 0.0;    // nominal start within the block
  double duration = 0.0;  // cost of the pass (from the cost model)
  int chain = 0;
};

struct BuildingBlock {
  int num_workers = 0;
  std::vector<int> stage_to_worker;
  double interval = 0.0;          // repetition period
  std::vector<BlockPass> passes;  // 3 per stage: index 3*stage + {0: F, 1: B, 2: W}

  int NumStages() const { return static_cast<int>(stage_to_worker.size()); }
  const BlockPass& Pass(ActionKind kind, int stage) const;
  // Nominal start of `kind` of `stage` for microbatch `mb` when the block repeats.
  double Nominal(ActionKind kind, int stage, int mb) const {
    return Pass(kind, stage).offset + mb * interval;
  }
};

// Shape of a V-shape block (2 chunks per worker, VPlacement). The block is the microbatch's
// dependency chain laid out as early as the real costs and `comm` allow, then stretched: each
// hop of a leg waits an extra gap, given as a multiple of that leg's pass cost. Legs: chunk-0
// forward (stages 0..p-1), chunk-1 forward (p..2p-1), chunk-1 backward (2p-1..p), chunk-0
// backward (p-1..0). W(s) starts `w_delay` x W-cost after B(s) ends (0 = right after).
// All zero = the tight block (V-Min's memory); f0_gap = b1_gap = 1 is V-Half's shape.
struct VBlockShape {
  double f0_gap = 0.0;
  double f1_gap = 0.0;
  double b1_gap = 0.0;
  double b0_gap = 0.0;
  double w_delay = 0.0;
  // The period starts at (1 + period_stretch) x the busiest worker's work: a longer period
  // leaves room so the chain rarely waits for a busy worker, which shortens lifespans (memory)
  // at the price of a slower steady state; the list scheduler squeezes most of it back.
  double period_stretch = 0.0;
};

// The interval is the busiest worker's work per microbatch (sum of its F, B, W costs), the
// smallest period at which the block can repeat without overloading a worker.
BuildingBlock MakeVBlock(int num_workers, const CostModel& costs, const VBlockShape& shape);

// Per worker: sum over its stages of ceil(lifespan / interval) * activation (memory units).
std::vector<double> LifespanPeakBound(const BuildingBlock& block, const CostModel& costs);

// Lifespan (W end - F start) of every stage in the block.
std::vector<double> Lifespans(const BuildingBlock& block);

// The block repeated `num_microbatches` times, each worker's actions in nominal-time order
// (ties by chain position, then microbatch). Compute actions only (F, B, W). Simulating it is
// the "squeeze": same order, idle time removed, real costs and dependencies respected.
Schedule RepeatBlock(const BuildingBlock& block, int num_microbatches, std::string name);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_BUILDING_BLOCK_H_
