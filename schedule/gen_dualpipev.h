// DualPipeV: the V-shaped, "cut in half" form of DeepSeek-V3's bidirectional DualPipe schedule
// (DeepSeek-V3 technical report, arXiv 2412.19437; PyTorch ships it as ScheduleDualPipeV).
//
// Placement: V (2 chunks per worker; worker r holds stage r, "chunk 0", and stage 2p-1-r,
// "chunk 1"). Every chunk runs its forwards and its backwards in microbatch order. Worker r's
// list, in eight phases (m >= 2p):
//   1. 2(p-1-r) chunk-0 F
//   2. r+1 times: chunk-0 F, chunk-1 F
//   3. p-1-r times: chunk-1 B (input gradient only), one W, chunk-1 F
//   4. m-2p+r+1 times: overlapped (chunk-0 F + chunk-1 BW), overlapped (chunk-1 F + chunk-0 BW);
//      the last worker runs its first chunk-0 F and chunk-1 BW one after the other, not as a
//      pair, since the F feeds its own chunk 1
//   5. p-1-r times: chunk-1 BW, overlapped (chunk-1 F + chunk-0 BW)
//   6. r+1 times: chunk-1 backward, chunk-0 backward; the second half of them split (B now,
//      W later), from the middle of the phase on
//   7. p-1-r times: one W, chunk-0 B
//   8. r+1 times: one W
// W's run in the order their B's ran. An overlapped pair is an OVERLAP_F action followed by
// its BW (action.h); one compute stream runs it as the F, then the BW.
// Unit costs (F = B = W per worker share), no transfer cost: every worker peaks at p + 1/2
// units (2p+1 chunk activations; ZB-V and 1F1B peak at p), and the step takes 3m + (p-1)/2, the
// same as ZB-V's (both leave (p-1)/2 of each worker's time idle). The one-stream simulator
// charges an overlapped pair F + BW; a runtime that truly overlaps them would go faster.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_GEN_DUALPIPEV_H_
#define PIPETRAIN_SCHEDULE_GEN_DUALPIPEV_H_

#include "absl/status/statusor.h"
#include "schedule/pipeline_spec.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// InvalidArgument naming the field when p < 2, m < 2p (the phases above need m >= 2p), or
// chunks_per_worker is neither 0 nor 2. Ignores memory_limit (callers compare the peak).
absl::StatusOr<Schedule> MakeDualPipeV(const PipelineSpec& spec);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_GEN_DUALPIPEV_H_
