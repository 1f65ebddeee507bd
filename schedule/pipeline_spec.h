// PipelineSpec: what a schedule generator is asked for -- workers, microbatches, chunks, the
// costs to plan with, the memory limit and the host link for offload -- and the cost model a
// generator plans with for it.
//
// Thread-safety: value type and a pure function.
#ifndef PIPETRAIN_SCHEDULE_PIPELINE_SPEC_H_
#define PIPETRAIN_SCHEDULE_PIPELINE_SPEC_H_

#include "schedule/cost_model.h"

namespace pipetrain::schedule {

struct PipelineSpec {
  int num_workers = 0;        // p >= 1
  int num_microbatches = 0;   // m >= 1
  int chunks_per_worker = 0;  // v; 0 = the generator's default (1, or 2 for V-shape)
  // Costs for a worker's whole share of layers (split evenly over its chunks) ...
  double f = 1.0, b = 1.0, w = 1.0;
  double comm = 0.0;
  // ... unless `stage_costs` is non-empty: then it is used as is and must have one entry per
  // stage of the generated schedule.
  CostModel stage_costs;
  // Peak activation memory allowed per worker (units); 0 = unlimited. Generators that take a
  // memory limit (ZB-H1/H2, V-*, auto) respect it or fail with ResourceExhausted.
  double memory_limit = 0.0;
  // Offload ratio k of the host link (offload_ratio.h): one chunk's copy time out and back over
  // its f + b + w (each way k/2 of it, both directions alike). 0 = no host link: `auto` then plans without offload. When > 0 and
  // memory_limit is set, `auto` also considers offload plans (auto_planner.h).
  double offload_ratio = 0.0;
  // Microbatches per interleaving group for "interleaved-group" (generalised interleaved 1F1B);
  // 0 = p (Megatron's order).
  int group_size = 0;
};

// The cost model a generator plans with for a schedule of `num_stages` stages.
CostModel CostModelFor(const PipelineSpec& spec, int chunks_per_worker);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_PIPELINE_SPEC_H_
