// ActionOverhead: the fixed time every compute action costs whatever its microbatch size --
// dispatching it, the small kernels whose time does not grow with the rows (layer norms of a
// few columns, bias and softmax set-up, allocation of the outputs), the executor's bookkeeping.
// The analytic costs are FLOPs at an assumed device rate, linear in the microbatch size, so
// without this term 128 microbatches of 1 cost exactly what 8 of 16 cost and the microbatch-size
// search (PlannerOptions::search_microbatch_size) picked the smallest size, which ran 2-3x
// slower (docs/data_parallel.md). With it, an action of a stage takes
//   time = overhead(kind) + size x per_sample(kind)
// and the planner adds the overhead to each analytic F, B and W of every stage (planner.h).
//
// The overhead is per transformer block of the action's stage: an action runs every block's
// kernels, and the small ones among them cost about the same at any size. Measured
// (bench/runtime/action_overhead_bench.cc: the profiling step's own timing of each stage of the
// default job at microbatches of 1, 2, 4, 8 and 16, the best of 5 rounds, fitted per action kind
// by FitActionTimes; load average 5.3 on the 2 cores, 2026-11-27 03:10 UTC): 8 stages of one
// block gave F / B / W overheads of 6.9-11.1 / 9.6-15.7 / 12.0-16.0 us over three runs, 4 stages
// of two blocks 31.5 / 39.5 / 35.5 us (2.2-3.9x). A constant per action would charge a V
// schedule (twice the stages, half the blocks each) twice the overhead of a 1-chunk one.
// The per-sample slope is not taken from the fit: the planner keeps its FLOPs at the assumed
// device rate (or the profiled seconds per FLOP).
//
// Thread-safety: value types and pure functions.
#ifndef PIPETRAIN_PLANNER_ACTION_OVERHEAD_H_
#define PIPETRAIN_PLANNER_ACTION_OVERHEAD_H_

#include <vector>

#include "absl/status/statusor.h"

namespace pipetrain::planner {

// Seconds per action of each kind and per transformer block of its stage, independent of the
// microbatch size.
struct ActionOverhead {
  double forward_s = 0;
  double backward_input_s = 0;
  double backward_weight_s = 0;
};

// Measured on the CPU runtime (OpenBLAS, one thread per worker), default job (hidden 64, one
// block per stage): the median of the three runs above.
inline constexpr ActionOverhead kCpuActionOverhead{
    .forward_s = 8e-6, .backward_input_s = 13e-6, .backward_weight_s = 13e-6};

// One action kind's time = overhead + size x per_sample.
struct LinearActionTime {
  double overhead_s = 0;
  double per_sample_s = 0;
  double At(double microbatch_size) const { return overhead_s + microbatch_size * per_sample_s; }
};

struct ActionTimeFit {
  LinearActionTime forward, backward_input, backward_weight;
  ActionOverhead Overhead() const {
    return {forward.overhead_s, backward_input.overhead_s, backward_weight.overhead_s};
  }
};

// Times of one action of each kind (e.g. the mean over a pipeline's stages) at one size.
struct SizedActionTimes {
  int microbatch_size = 0;
  double forward_s = 0;
  double backward_input_s = 0;
  double backward_weight_s = 0;
};

// The least-squares line through the times of each kind against the size (exact through two
// points). InvalidArgument unless there are at least two distinct sizes >= 1 and every time is
// finite and >= 0. The fitted overhead may come out negative when the times are noisy; it is
// returned as fitted, and callers decide (the bench reports it).
absl::StatusOr<ActionTimeFit> FitActionTimes(const std::vector<SizedActionTimes>& points);

}  // namespace pipetrain::planner

#endif  // PIPETRAIN_PLANNER_ACTION_OVERHEAD_H_
