// An independent baseline of the zero-bubble authors' ZB-V builder (their "V schedule" greedy
// with the approved-bubble refinement), written from the published procedure and NOT from
// pipetrain's generators (it shares no code with schedule/ beyond the Action type it returns).
//
// V placement: stage (worker) i holds chunk 0 (model stage i) and chunk 1 (model stage 2p-1-i).
// Every pass of a chunk costs f, b, w (one chunk's share); a transfer between stages costs
// `comm` (the V's tip, chunk 0 -> chunk 1 on stage p-1, and the loss turn on stage 0 cost none).
// Memory in chunk units: F +1, B 0, W -1, cap 2p (p units of a worker's whole share).
// put(stage, pass) appends the stage's next pass of that kind, as soon as possible after the
// stage is free and its input has arrived; each B queues its W (one FIFO per stage); a stage's
// idle time counts once its first F has run.
//   Warm-up: one chunk-0 F on every stage; then for i = p-1 .. 0: stage i (except the last)
//     takes chunk-0 F's (each one on every stage 0..i) while its memory plus 2 + 2i chunks fits
//     the cap, the F ends before chunk 1's F of stage i+1 arrives, and F's are left; then its
//     chunk-1 F. Then, alternating the chunk k = 0, 1, ..., for i = 1 .. p-1: while stage i has
//     issued fewer F's than stage i-1, or no more chunk-1 F's than stage i-1 (which has some
//     left), put F(k) on stages p-1 .. i (where left) and flip k.
//   Steady state, 2m rounds: each stage's next B is chunk 1's (travelling down) if it has
//     issued as many chunk-0 B's as chunk-1 B's; otherwise chunk 0's (travelling up) if it is
//     the last stage, its input from stage i+1 is done, or all chunk-1 B's are issued, else
//     chunk 1's. The chunk-0 B's go first, stages high to low, then the chunk-1 B's, low to
//     high. Before each B: W's while one ends before the B's input arrives; then one more W if
//     the gap left exceeds the stage's budget (the largest idle of any stage, or the approved
//     one, minus its own idle) -- always before a chunk-0 B, before a chunk-1 B only with
//     fill_b. Then on every stage with chunk-1 F's left: chunk 0's F if it has issued as many
//     chunk-1 F's as chunk-0 F's; else chunk 1's if it is the last stage or its input is done;
//     else chunk 0's if its input is done (stage 0: always); W's while memory is full; the same
//     W fill before it (the extra W with fill_f); the F.
//   Finally every stage's remaining W's.
// A run is repeated with each stage's idle time as its approved bubble while the largest idle
// shrinks; the four fill_b x fill_f variants each do so; the least largest idle wins (the
// authors' criterion). Where the description is terse the reading above is this file's: a W
// fill needs a pending W, the extra-W test needs a cross-stage input, and a run that would put
// a pass before its input is placed is dropped.
#ifndef PIPETRAIN_TESTS_SCHEDULE_ZB_AUTHORS_ZBV_BASELINE_H_
#define PIPETRAIN_TESTS_SCHEDULE_ZB_AUTHORS_ZBV_BASELINE_H_

#include <vector>

#include "schedule/action.h"

namespace pipetrain::schedule::testing {

struct AuthorsZbvPlan {
  // Per stage (= worker), the compute actions in execution order; model stages 0..2p-1.
  std::vector<std::vector<Action>> order;
  double max_span = 0;    // the longest stage span (its first start to its last end)
  double bubble = 0;      // 1 - 2m (f + b + w) / max_span
  double peak_units = 0;  // the largest stage peak, units of a worker's share (a chunk = 1/2)
  bool ok = false;        // false: every variant was dropped
};

// f, b, w: one CHUNK's costs (half a worker's share); comm: one transfer between stages.
AuthorsZbvPlan AuthorsZbvSchedule(int p, int m, double f, double b, double w, double comm);

}  // namespace pipetrain::schedule::testing

#endif  // PIPETRAIN_TESTS_SCHEDULE_ZB_AUTHORS_ZBV_BASELINE_H_
