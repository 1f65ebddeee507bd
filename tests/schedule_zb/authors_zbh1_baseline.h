// An independent baseline of the zero-bubble authors' ZB-H1 builder (their greedy "manual
// order" with 8 variants), written from the published procedure and NOT from pipetrain's
// generators (it shares no code with schedule/ beyond the Action type it returns).
//
// One stage per worker; every F/B/W of a stage costs F, B, W; a transfer between workers costs
// `comm`. Memory in units of a worker's activations for one microbatch: F +1, B 0, W -1, cap p.
// put(stage, kind) appends the stage's next node of that kind, timed as soon as possible: F after
// the previous stage's F of the microbatch (+comm), B after the next stage's B (+comm; the last
// stage's B after its own F), W after nothing (its B is earlier in the same list); a stage's idle
// time counts once its first F has run. Per microbatch i:
//   i = 0: F on every stage; then the warm-up depth: walking j = p-2 .. 0 with last_t the end of
//     B(j+1, 0), stage j takes extra F's while memory allows and each one ends (variant
//     allow_bubble_before_first_b) or starts (otherwise) before last_t + comm; then
//     last_t = max(stage j's end after them, last_t + comm) + B. extra[] is made strictly
//     decreasing in j (upstream runs ahead), the extra F's are put, then B(0) on p-1 .. 0.
//   i > 0: need[j] = 1 where F's are left. In the prioritize_b variant, a stage that has issued
//     >= 2 more F's than stage j+1 looks at X = end(j+1) + F + B + comm: it skips its F when it
//     is free only at X or later, takes it when its F (with the W's memory forces) ends by X,
//     and otherwise skips it when the idle gap X - end(j) is within its bubble budget (the
//     largest stage idle so far minus its own). need[j] = min(need[j], need[j+1]), j descending.
//     Stages with need, ascending: W's while memory is full; W's while one ends before the F's
//     input arrives; then, if a gap is left, one more W when the gap exceeds the budget (or
//     always, in the no_bubble_greedy variant); then F. All stages, descending: the same W fill
//     against the B's input (stage 0 first flushes every pending W once its F's are all
//     issued); then B. Finally every stage puts its remaining W's.
// All 8 variants run; the one with the least longest stage span (first F start to last end)
// wins. Where the description is terse the reading above is this file's: the extra warm-up F's
// are timed back to back from the stage's end, a W fill needs a pending W, and a W queue is
// FIFO.
#ifndef PIPETRAIN_TESTS_SCHEDULE_ZB_AUTHORS_ZBH1_BASELINE_H_
#define PIPETRAIN_TESTS_SCHEDULE_ZB_AUTHORS_ZBH1_BASELINE_H_

#include <vector>

#include "schedule/action.h"

namespace pipetrain::schedule::testing {

struct AuthorsZbPlan {
  std::vector<std::vector<Action>> order;  // per stage (= worker), F/B/W in execution order
  double max_span = 0;    // the longest stage span (its first start to its last end)
  double bubble = 0;      // 1 - m (F + B + W) / max_span
  double peak_units = 0;  // the largest stage peak (F +1, W -1)
};

// f, b, w: one stage's costs; comm: one transfer between workers. Memory cap p units.
AuthorsZbPlan AuthorsZbH1Schedule(int p, int m, double f, double b, double w, double comm);

}  // namespace pipetrain::schedule::testing

#endif  // PIPETRAIN_TESTS_SCHEDULE_ZB_AUTHORS_ZBH1_BASELINE_H_
