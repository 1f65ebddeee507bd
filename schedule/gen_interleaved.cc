// Interleaved 1F1B (Megatron-LM order): v chunks per worker, stage c*p + w on worker w. The
// k-th forward slot of a worker runs chunk (k mod pv) / p on microbatch (k / pv) * p + k mod p;
// backward slots walk the chunks in reverse. Worker w warms up with 2(p-1-w) + (v-1)p forwards.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "schedule/generators_classic.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> MakeInterleaved1F1B(const PipelineSpec& spec) {
  const int p = spec.num_workers, m = spec.num_microbatches;
  const int v = spec.chunks_per_worker == 0 ? 2 : spec.chunks_per_worker;
  if (v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks_per_worker must be >= 1 for interleaved-1f1b (got ", spec.chunks_per_worker, ")"));
  }
  if (m % p != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interleaved-1f1b needs num_microbatches to be a multiple of num_workers (m >= p): got m=",
        m, ", p=", p, "; allowed m = ", p, ", ", 2 * p, ", ", 3 * p, ", ..."));
  }
  Schedule s = MakeEmptySchedule("interleaved-1f1b", p, m, LoopPlacement(p, v));
  const int total = m * v, group = p * v;
  for (int w = 0; w < p; ++w) {
    auto unit = [&](int k, bool forward) {
      const int chunk_slot = (k % group) / p;
      const int chunk = forward ? chunk_slot : v - 1 - chunk_slot;
      const int mb = (k / group) * p + k % p;
      return Action{forward ? ActionKind::kF : ActionKind::kBW, chunk * p + w, mb};
    };
    const int warmup =
        v == 1 ? std::min(p - 1 - w, total) : std::min(2 * (p - 1 - w) + (v - 1) * p, total);
    auto& list = s.worker_actions[w];
    list.reserve(2 * total);
    for (int k = 0; k < warmup; ++k) list.push_back(unit(k, true));
    for (int k = 0; k < total - warmup; ++k) {
      list.push_back(unit(warmup + k, true));
      list.push_back(unit(k, false));
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(unit(k, false));
  }
  return s;
}

}  // namespace pipetrain::schedule
