// Generalised interleaved 1F1B: v chunks per worker, stage c*p + w on worker w, microbatches in
// groups of g. The k-th forward slot of a worker runs chunk (k mod gv) / g on microbatch
// (k / gv) * g + k mod g; backward slots walk the chunks in reverse. With g = p this is
// Megatron's interleaved order; a smaller g shortens the warm-up ((v-1)g + 2(p-1-w) forwards)
// and with it the peak memory, at the price of more bubble (PipeOffload's base schedule).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "schedule/generators_classic.h"
#include "schedule/quick_validate.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> MakeGroupedInterleaved(const PipelineSpec& spec) {
  const int p = spec.num_workers, m = spec.num_microbatches;
  const int v = spec.chunks_per_worker;  // resolved by Generate
  const int g = spec.group_size == 0 ? p : spec.group_size;
  if (v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks_per_worker must be >= 1 for interleaved-group (got ", spec.chunks_per_worker, ")"));
  }
  const int min_g = (p + 1) / 2;
  if (g < min_g || g > m) {
    return absl::InvalidArgumentError(absl::StrCat("group_size for interleaved-group must be in ",
                                                   min_g, "..", m, " (ceil(p/2)..m; got ", g,
                                                   ")"));
  }
  if (m % g != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("interleaved-group needs num_microbatches to be a multiple of group_size: got "
                     "m=", m, ", group_size=", g));
  }
  return GroupedInterleavedOrder(p, m, v, g, /*slope=*/2);
}

Schedule GroupedInterleavedOrder(int p, int m, int v, int g, int slope) {
  const int total = m * v, round = g * v;
  // With g < p (or a slope below 2) the closed-form warm-up can leave a worker's backward ahead
  // of a forward another worker waits for; then every warm-up grows by one until the dry run
  // passes.
  for (int extra = 0;; ++extra) {
    Schedule s = MakeEmptySchedule("interleaved-group", p, m, LoopPlacement(p, v));
    for (int w = 0; w < p; ++w) {
      auto unit = [&](int k, bool forward) {
        const int chunk_slot = (k % round) / g;
        const int chunk = forward ? chunk_slot : v - 1 - chunk_slot;
        const int mb = (k / round) * g + k % g;
        return Action{forward ? ActionKind::kF : ActionKind::kBW, chunk * p + w, mb};
      };
      const int warmup = v == 1 ? std::min(p - 1 - w + extra, total)
                                : std::min((v - 1) * g + slope * (p - 1 - w) + extra, total);
      auto& list = s.worker_actions[w];
      list.reserve(2 * total);
      for (int k = 0; k < warmup; ++k) list.push_back(unit(k, true));
      for (int k = 0; k < total - warmup; ++k) {
        list.push_back(unit(warmup + k, true));
        list.push_back(unit(k, false));
      }
      for (int k = total - warmup; k < total; ++k) list.push_back(unit(k, false));
    }
    if ((g >= p && slope >= 2) || QuickValidate(s) || extra >= total) return s;
  }
}

}  // namespace pipetrain::schedule
