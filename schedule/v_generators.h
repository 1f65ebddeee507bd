// The V-shape schedule family of "Pipeline Parallelism with Controllable Memory" (arXiv 2405.15362):
// 2 chunks per worker, worker i holds stage i and stage 2p-1-i (VPlacement), so each
// microbatch runs down the workers and back up. Registry names: "v-min", "v-half", "v-zb",
// "zb-v", and "v-adaptive" (the paper's adaptive scheduler under spec.memory_limit).
//
// Every generator plans with the REAL per-stage F/B/W costs and comm (CostModelFor(spec, 2)) and
// keeps the best (least longest worker span) of its candidates that fit the memory cap:
//   - the memory-capped greedy engine (v_greedy.h) under a few priority rules x in-flight limits;
//   - for v-min / v-half / v-zb / v-adaptive, the authors' fixed V-Min / V-Half slot patterns
//     (v_pattern.h), real-cost timed, so they are never worse than that pattern when it fits;
//   - for v-half, repeated building blocks: a few fixed shapes (building_block.h) and blocks
//     searched with the real costs (v_block_search.h);
//   - for v-min, v-half and v-adaptive, modulo-scheduled blocks whose peak is checked exactly
//     during the search, at the shortest period that fits (v_modulo_block.h).
// The choice among the candidates (prefix screening, predicted full-m spans, early stops) is
// PlanBestV (v_finalists.h); this file builds the candidates and finishes the winner. Its order
// is then polished under the same cap (order_polish.h: critical-path local search, ~60 ms at
// most; schedules of up to 8192 actions), which recovers idle time in warm-up and cool-down that
// the rules leave, mostly with comm > 0. zb-v and v-zb also run the ZB-V wave scheduler
// (v_zbv.h, the authors' ZB-V algorithm with real costs and lazy W's); it wins at cap p (zb-v:
// against the one backward-first greedy; v-zb: against the full search, skipped once the wave
// hits the bound).
// Output: F, B, W compute actions only.
//
// Memory laws (units = one microbatch's activations for a worker's whole share; each chunk holds
// 1/2), guaranteed for ANY costs because peak memory depends on the action order only:
//   v-min  peak <= (p+4)//3      v-half peak <= (p+2)//2      v-zb, zb-v peak <= p
// v-min's peak equals its law for unit costs and m >= p (tested p = 2..32); v-half may pick a
// lower-memory plan when it is faster. spec.memory_limit, when set, lowers the cap further.
//
// Bubbles (unit costs): v-zb and zb-v <= 0.01 for m >= 2p, p <= 16 (measured exactly 0, as the
// paper); with 1:2:1 <= 0.11 and 1:1.5:0.5 <= 0.14 at m >= 2p; v-min <= 0.75x 1F1B's (~0.7x);
// v-half <= 0.6x (0.35-0.6x); with 1:2:1 and 1:1.5:0.5 (comm 0) below 1F1B on the tested grid
// p 2..16 (1:1.5:0.5 p=16 m=64: 0.163 vs 0.190). KNOWN GAP: with comm > 0 and B > F v-half can
// be above 1F1B at large m (1:2:1, comm 0.2, p=16, m=64: 0.276 vs 0.259; docs/SCHEDULES.md).
// How V-Min degrades with unequal F/B/W: its cap is sized for unit costs. The chunk-0 lifespan
// on worker 0 is a round trip, ~p(F+B); in-flight microbatches needed = that / (F+B+W). When B
// or F dominates this exceeds the cap, the steady state is memory-starved and a per-microbatch
// bubble appears that does not shrink with m (1:2:1, p=16, m=64: 0.40 vs 1F1B 0.19; see
// docs/SCHEDULES.md). The paper's near-zero-bubble condition at half memory is W+2B >= 2F and
// W+2F >= 2B. Modulo blocks at a longer period recover part of it where one fits within +50%
// (1:2:1, p=8, m=64: 0.30 -> 0.17).
//
// Limits: p >= 2, m >= 1, chunks_per_worker 0 or 2, stage_costs (if given) 2p entries;
// memory_limit either 0 or at least one microbatch (1 unit). Others: InvalidArgument /
// ResourceExhausted naming the field.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_V_GENERATORS_H_
#define PIPETRAIN_SCHEDULE_V_GENERATORS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schedule/pipeline_spec.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// Peak activation memory laws (units) for p workers.
int VMinPeakLaw(int p);   // (p+4)//3
int VHalfPeakLaw(int p);  // (p+2)//2
int VZbPeakLaw(int p);    // p

// The memory cap (units per worker) the V generators plan within for a peak law: the law, or
// spec.memory_limit when that is lower, but at least one microbatch on the fullest worker. Every
// plan of v-min (law VMinPeakLaw), v-half and v-zb keeps its peak within it. Needs 2p stage costs
// (CheckVSpec).
double VPlanCap(const PipelineSpec& spec, double law);

// Checks the fields the V generators need (see Limits above).
absl::Status CheckVSpec(const PipelineSpec& spec);

absl::StatusOr<Schedule> MakeVMin(const PipelineSpec& spec);
absl::StatusOr<Schedule> MakeVHalf(const PipelineSpec& spec);
absl::StatusOr<Schedule> MakeVZb(const PipelineSpec& spec);
absl::StatusOr<Schedule> MakeZbV(const PipelineSpec& spec);
// The adaptive scheduler: searches all block shapes under spec.memory_limit (required > 0).
absl::StatusOr<Schedule> MakeVAdaptive(const PipelineSpec& spec);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_GENERATORS_H_
