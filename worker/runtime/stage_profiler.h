// ProfileStages: the profiling step. Times F, B and W of one microbatch on each stage a worker
// holds, on the worker's own runner and backend, so the coordinator can plan with measured
// per-action times instead of analytic FLOPs at an assumed device rate. Stages that do not read
// data get a zero activation of the boundary shape, and B gets a zero output gradient: the time
// of dense kernels does not depend on the values. Each action keeps its typical warm time: the
// median of the repeats after the first, capped at 1.25x the fastest. The fastest alone ran 3-5%
// below what the same actions take inside a step (default job, 2 workers, 2026-11-25: F 1260 us
// fastest, 1317 us warm median, 1311 us median in the step), so every prediction came out short;
// the cap keeps the old reason for the fastest: on a shared machine a repeat can lose the core
// for tens of milliseconds (45 ms for a 0.7 ms W was seen), which would make the plan wrong.
//
// Nothing of the profile survives: no optimizer step runs, what F stored is freed by W, the
// gradients it accumulated are cleared by the next BeginStep, and the activation peak is reset.
//
// Thread-safety: not thread-safe (drives the runner like the executor does).
#ifndef PIPETRAIN_WORKER_RUNTIME_STAGE_PROFILER_H_
#define PIPETRAIN_WORKER_RUNTIME_STAGE_PROFILER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/runtime/stage_runner.h"

namespace pipetrain::worker {

struct StageProfile {
  int stage = 0;
  double forward_s = 0;          // typical warm time (see above)
  double backward_input_s = 0;
  double backward_weight_s = 0;
};

struct ProfileShape {
  int num_stages = 1;     // of the whole pipeline (the last one computes the loss)
  int64_t rows = 1;       // microbatch_size * seq_len: rows of a boundary activation
  int64_t hidden = 1;     // its columns
  int step = 0;           // the step whose microbatch 0 the data-reading stages use
  int repeats = 5;
};

// One entry per stage in `stages`, in that order.
// The typical warm time of an action from its repeats in run order: the median of all but the
// first (cold caches, first allocations) when there are 3 or more, at most 1.25x the fastest.
double TypicalSeconds(std::vector<double> repeats);

absl::StatusOr<std::vector<StageProfile>> ProfileStages(StageRunner& runner,
                                                        const std::vector<int>& stages,
                                                        const ProfileShape& shape);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_STAGE_PROFILER_H_
