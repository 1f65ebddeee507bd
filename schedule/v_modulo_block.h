// ModuloVBlocks: V-shape building blocks (building_block.h) found by modulo scheduling under a
// memory cap, with the peak checked EXACTLY while searching (not after).
//
// A block repeats every `period`; worker i runs, modulo the period, its four chain passes (F of
// chunk 0 "x", F of chunk 1 "y", B of chunk 1 "z", B of chunk 0 "u") and two W's without
// overlap. Time is a grid of slots on which the costs are exact whenever 20..60 slots per
// busiest-worker work allow it (1:2:1 with comm 0.2: 40 slots of 0.1), else rounded up (the grid
// then only shapes the ORDER; the caller times the repeated block with the real costs). A period
// has at most 128 slots.
//
// A beam goes over workers 0..p-1. Its state is worker i's four phases; a step picks worker
// i+1's local layout (the relative phases of y, z, u to x, from the table of layouts where all
// six passes fit) and the shift of x: the four hops' waits are then fixed, and their sum, which
// only changes at four breakpoints, is minimised over the shift. Why this is exact on memory:
// with every phase fixed, chunk 1's lifespan on worker i (F up to worker 0, back down to i) is
// known once i is reached, and chunk 0's is G - K_i, where G (the chain's full length, B of
// stage 0) is common to all workers and K_i is known at i. The periodic peak of worker i as a
// function of chunk 0's lifespan gives the largest G that worker allows; a state carries the
// least of those (G_max) and the part of G fixed so far, and dies when the hops still to come
// cannot fit. Complete blocks have G <= G_max: their repeated peak is within the cap on every
// worker, and G (the block's length) is what the beam minimises, with half the beam kept for
// the states with the most memory slack.
//
// Why a search at all: the authors' V-Half is a unit-cost pattern, and with comm > 0 or B != F
// its waits pile up; with the real costs a block at (or near) the busiest worker's work per
// microbatch often exists within V-Half's cap (1:2:1, comm 0.2, p = 4: period 4.0, peak 3).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_V_MODULO_BLOCK_H_
#define PIPETRAIN_SCHEDULE_V_MODULO_BLOCK_H_

#include <vector>

#include "schedule/building_block.h"
#include "schedule/cost_model.h"

namespace pipetrain::schedule {

struct ModuloBlockOptions {
  int beam = 32;             // states kept per worker, at most
  long max_steps = 1500000;  // transitions per search: the beam narrows to stay within
  // Hard limit on transitions per search: beyond it (even a beam of 4 would pass it) each state
  // tries only a share of the layouts.
  long max_transitions = 1L << 40;
  int extra_slots = 0;  // period = busiest worker's work + this many grid slots
  int max_results = 3;  // complete blocks returned, shortest first
};

// Blocks for p >= 2 workers (VPlacement) whose repeated peak is <= cap (memory units) on every
// worker, shortest first; empty when the beam finds none at this period.
std::vector<BuildingBlock> ModuloVBlocks(int num_workers, const CostModel& costs, double cap,
                                         const ModuloBlockOptions& options);

// Slots per busiest-worker work: the smallest of 20..60 on which every cost is whole, else the
// least rounding error among a few (see above); ModuloVBlocks uses it.
int ModuloGridSlots(int num_workers, const CostModel& costs);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_MODULO_BLOCK_H_
