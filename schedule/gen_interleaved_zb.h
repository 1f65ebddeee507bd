// Interleaved zero bubble ("interleaved-zb"): interleaved 1F1B's looped placement (stage c*p + w
// on worker w, v >= 2 chunks per worker) with the backward split into B and W, like PyTorch's
// ScheduleInterleavedZeroBubble.
//
// Built in three steps:
//   1. The F / B order of the generalised interleaved 1F1B (gen_grouped.cc: groups of g
//      microbatches, g = spec.group_size or p, i.e. Megatron's order), its fused backwards
//      split into B (input gradient) and a pending W; both with Megatron's warm-up,
//      (v-1)g + 2(p-1-w) forwards on worker w, and with a shallower (v-1)g + (p-1-w) (grown
//      until the order runs), which holds less memory (p = 4, v = 2: 4 units instead of 5.5).
//   2. W placement by a list scheduler over simulated time, the F/B order fixed: before each F
//      or B a worker runs its oldest pending W's while one ends by the time that action's input
//      arrives (filling the wait), and before an F also while the F would not fit the memory
//      cap; leftover W's run at the end. Times are as soon as possible (Simulate's rules).
//   3. PolishOrder (order_polish.h) under the same cap, for schedules of up to 8192 actions.
//      The shorter of the two plans that fit wins.
// The cap is memory_limit when set, else the peak of the fused order of step 1 (interleaved
// 1F1B's memory). When memory_limit is set and group_size is not, g goes from p down to
// ceil(p/2) over the divisors of m and the first (largest) g with a plan that fits wins; below
// p only the shallow warm-up is tried (Megatron's needs many repairs there).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_GEN_INTERLEAVED_ZB_H_
#define PIPETRAIN_SCHEDULE_GEN_INTERLEAVED_ZB_H_

#include "absl/status/statusor.h"
#include "schedule/pipeline_spec.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// InvalidArgument naming the field for v < 2 or the grouped order's limits (m a multiple of
// the group size, ceil(p/2) <= g <= m); ResourceExhausted naming memory_limit when no group
// size fits it.
absl::StatusOr<Schedule> MakeInterleavedZb(const PipelineSpec& spec);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_GEN_INTERLEAVED_ZB_H_
