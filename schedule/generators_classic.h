// The classic schedule generators: GPipe, 1F1B, interleaved 1F1B, ZB-H1 and ZB-H2. Each lives
// in its own gen_*.cc; they are reached through the registry in generator.cc (use Generate()).
// They emit compute actions only, on the loop placement (stage s on worker s % p).
//
// Limits (anything else is InvalidArgument naming the field and the allowed values):
//   gpipe             v = 1; any m >= 1. Order per worker: all F, then all BW (microbatch order).
//   1f1b              v = 1; any m >= 1. Worker w: min(p-1-w, m) warm-up F, then F/BW pairs.
//   interleaved-1f1b  v >= 1 (default 2); m must be a multiple of p (Megatron's order; m < p and
//                     ragged last groups are rejected rather than planned with extra bubbles).
//   interleaved-group v >= 1 (default 2), group size g (spec.group_size, 0 = p) with
//                     ceil(p/2) <= g <= m; m a multiple of g. Warm-up 2(p-1-w) + (v-1)g.
//   zb-h1, zb-h2      v = 1; any m >= 1. Greedy over simulated time with split B/W (gen_zb.cc):
//                     F while the worker's activation memory stays within the limit, W to free
//                     memory or to fill idle time; zb-h1 keeps 1F1B's F/B order, zb-h2 lets B go
//                     first. Limit: spec.memory_limit, else p units (zb-h1, 1F1B's memory) or
//                     2p units (zb-h2). Unit costs: zb-h1 bubble (p-1)/(3m+p-1) at peak p
//                     (m >= p); zb-h2 bubble 0 for m >= 2p at peak <= 2p.
// Memory model used by the ZB limits: the cost model's (F allocates `activation`, B frees
// `freed_by_b`, W frees the rest); with the default freed_by_b = 0 that is the papers' figure
// accounting "+1 at F, -1 at W", the model every test and the simulator report use. It is the
// conservative choice: any B release only lowers the real peak.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_GENERATORS_CLASSIC_H_
#define PIPETRAIN_SCHEDULE_GENERATORS_CLASSIC_H_

#include "absl/status/statusor.h"
#include "schedule/pipeline_spec.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// Called through Generate (generator.h), which resolves spec.chunks_per_worker to the registry's
// count: 1 here, except for the interleaved schedules (>= 1).
absl::StatusOr<Schedule> MakeGpipe(const PipelineSpec& spec);
absl::StatusOr<Schedule> Make1F1B(const PipelineSpec& spec);
// Interleaved 1F1B is the grouped form below with groups of p microbatches.
absl::StatusOr<Schedule> MakeInterleaved1F1B(const PipelineSpec& spec);
// Generalised interleaved 1F1B (PipeOffload's base schedule): like interleaved-1f1b but the
// chunks cycle over groups of g = spec.group_size microbatches instead of p (gen_grouped.cc).
absl::StatusOr<Schedule> MakeGroupedInterleaved(const PipelineSpec& spec);
// Its order for valid p, m, v >= 1 and g (unchecked): worker w warms up with
// (v-1)g + slope (p-1-w) forwards (v = 1: p-1-w), grown by one on every worker until the dry run
// passes. MakeGroupedInterleaved uses slope 2; interleaved-zb also tries 1 (less memory).
Schedule GroupedInterleavedOrder(int p, int m, int v, int g, int slope);
absl::StatusOr<Schedule> MakeZbH1(const PipelineSpec& spec);
absl::StatusOr<Schedule> MakeZbH2(const PipelineSpec& spec);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_GENERATORS_CLASSIC_H_
