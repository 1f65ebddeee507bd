// An independent baseline of the authors' V-Min / V-Half builder (the zero-bubble authors'
// "stable pattern" scheduler), written from the published procedure and NOT from pipetrain's
// generators (it shares no code with schedule/ beyond the Action type it returns):
//
//   1. The stable pattern: 6 unit slots per microbatch; on stage i the slots of
//      [F chunk 0, F chunk 1, B chunk 1 (travels down the stages), B chunk 0 (travels up)]
//      for microbatch k are offset + 6k with
//        V-Min:  d = 2 if p % 3 == 0 else 0;  [i, 2p-1-i, 2p+d+i, 4p+d-1-i]
//        V-Half: d = 3 if p % 2 == 0 else 0;  [2i, 3p-2-i, 3p+d+2i-1, 6p+d-2-i]
//   2. put_w: walk a stage's slots; every B queues its W (one FIFO); every empty slot takes the
//      oldest queued W; W's left over go at the end.
//   3. reorder(consider_w = true), strip the W's, reorder(consider_w = false): with the target
//      peak = the current largest stage peak, visit the nodes in global slot order; phase 0 is
//      before the first chunk-0 B on stage 0, phase 1 up to stage 0's last chunk-0 F, phase 2
//      the rest. Phase 1 stays as is; nodes of phase 2 (and of phase 0 when consider_w) move to
//      the earliest free slot after their latest dependency whose stage peak stays <= target.
//      Dependencies: the cross-stage predecessor, the same-stage chain F0 -> F1 -> B1 -> B0 of
//      the microbatch, the previous microbatch's node of the same type, a W after its B. Memory
//      (chunk units): F +1, B 0, W -1; without placed W's, each free slot frees one queued W.
//   4. put_w with one FIFO per chunk (chunk 0's W's first), then eager timing with the real
//      costs and the transfer cost: each stage runs its slots in order, as soon as possible.
// Where the description is terse this reading is stated above (phases on stage 0; the target is
// the largest stage peak; a node that finds no better slot keeps its own).
#ifndef PIPETRAIN_TESTS_SCHEDULE_V_AUTHORS_V_BASELINE_H_
#define PIPETRAIN_TESTS_SCHEDULE_V_AUTHORS_V_BASELINE_H_

#include <vector>

#include "schedule/action.h"

namespace pipetrain::schedule::testing {

enum class AuthorsVKind { kMin, kHalf };

struct AuthorsVPlan {
  // Per stage (= worker), the compute actions in execution order. Stages 0..2p-1 in model
  // order: chunk 0 of worker i is stage i, chunk 1 is stage 2p-1-i.
  std::vector<std::vector<Action>> order;
  double max_span = 0;   // the longest worker span (its own first start to its last end)
  double makespan = 0;   // first start to last end over all workers
  double bubble = 0;     // per stage: 1 - a worker's work / max_span (every worker's work equal)
  double peak_units = 0; // the largest worker peak, units of a worker's share (a chunk = 1/2)
};

// f, b, w: one CHUNK's costs (half a worker's share); comm: one transfer between workers.
AuthorsVPlan AuthorsVSchedule(AuthorsVKind kind, int p, int m, double f, double b, double w,
                              double comm);

}  // namespace pipetrain::schedule::testing

#endif  // PIPETRAIN_TESTS_SCHEDULE_V_AUTHORS_V_BASELINE_H_
