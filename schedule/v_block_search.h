// SearchVBlocks: finds V-shape building blocks (building_block.h) that repeat at the busiest
// worker's work per microbatch (or a little more) with short lifespans, planned with the REAL
// F/B/W costs and comm. This is the paper's building-block framework done as a search instead of
// a fixed unit-cost pattern (the authors' V-Half pattern falls behind 1F1B when B != F).
//
// Time is a grid of `slots` per period; every pass occupies whole slots (costs rounded up).
// A block is described per worker i by the phases (slot mod period) of its four passes on the
// microbatch's chain: chunk-0 F (the "down" forward wave), chunk-1 F (up), chunk-1 B (down),
// chunk-0 B (up); its two W's take the first free room after their B. A worker's passes must
// not overlap modulo the period (so the block repeats without collisions). Between neighbouring
// workers each of the four waves may wait 0..max_wait slots per hop; at the turns (worker 0 and
// the tip) a wave waits for the worker's free phase. A beam search over workers 0..p-1 keeps the
// `beam` cheapest partial blocks, cost = waiting weighted by how many lifespans it lengthens
// (the up-going waves' waits count in both chunks' lifespans on the workers they pass) + W
// delays x w_weight. Lifespans set memory (the lifespan bound), waiting therefore is memory.
//
// The caller repeats the blocks (RepeatBlock), times them with real costs and keeps those whose
// simulated peak fits its cap; the grid only shapes the ORDER, the timing is exact.
//
// Costs: the search uses the largest per-stage F, B, W (uniform costs: exact). Thread-safety:
// pure function.
#ifndef PIPETRAIN_SCHEDULE_V_BLOCK_SEARCH_H_
#define PIPETRAIN_SCHEDULE_V_BLOCK_SEARCH_H_

#include <vector>

#include "schedule/building_block.h"
#include "schedule/cost_model.h"

namespace pipetrain::schedule {

struct VBlockSearchOptions {
  int slots = 12;        // grid slots per busiest-worker work (period before extra_slots)
  int extra_slots = 0;   // period = max(slots, rounded work) + extra_slots
  int beam = 200;        // partial blocks kept per worker
  int max_wait = 3;      // slots a wave may wait per hop
  int w_weight = 1;      // cost weight of a slot of W delay
  int max_results = 4;   // complete blocks returned, cheapest first
};

// The grid's inputs: the largest per-stage (chunk) F, B, W, the comm, and the busiest worker's
// work per microbatch (its period).
struct VChunkCosts {
  double f = 0, b = 0, w = 0, comm = 0, work = 0;
};
VChunkCosts LargestVChunkCosts(int num_workers, const CostModel& costs);

// Slots of width q a cost takes (rounded up; 0 for no cost).
int GridSlots(double x, double q);

// The V block (VPlacement) with stage s's F, B, W at slots f[s], b[s], w[s] of width q,
// repeating every period_slots; durations are the real costs.
BuildingBlock VBlockFromSlots(int num_workers, const CostModel& costs, const std::vector<long>& f,
                              const std::vector<long>& b, const std::vector<long>& w, double q,
                              int period_slots);

// Blocks for p >= 2 workers (VPlacement), cheapest first; empty when none exists on this grid.
std::vector<BuildingBlock> SearchVBlocks(int num_workers, const CostModel& costs,
                                         const VBlockSearchOptions& options);

// The grid resolution (slots per period) that represents the costs best: the smallest of a few
// candidates whose rounding error is least.
int ChooseVBlockSlots(int num_workers, const CostModel& costs);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_BLOCK_SEARCH_H_
