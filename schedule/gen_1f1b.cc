// 1F1B (PipeDream-flush): worker w warms up with min(p-1-w, m) forwards, then alternates one
// forward and one fused backward, then drains the remaining backwards. Peak min(m, p-w) units.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/generators_classic.h"

namespace pipetrain::schedule {

absl::Status RequireSingleChunk(const PipelineSpec& spec, absl::string_view schedule_name) {
  if (spec.chunks_per_worker == 0 || spec.chunks_per_worker == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "chunks_per_worker must be 1 for ", schedule_name, " (got ", spec.chunks_per_worker,
      "); use interleaved-1f1b or a V-shape schedule for more chunks"));
}

absl::StatusOr<Schedule> Make1F1B(const PipelineSpec& spec) {
  PT_RETURN_IF_ERROR(RequireSingleChunk(spec, "1f1b"));
  const int p = spec.num_workers, m = spec.num_microbatches;
  Schedule s = MakeEmptySchedule("1f1b", p, m, LoopPlacement(p, 1));
  for (int w = 0; w < p; ++w) {
    auto& list = s.worker_actions[w];
    list.reserve(2 * m);
    const int warmup = std::min(p - 1 - w, m);
    for (int i = 0; i < warmup; ++i) list.push_back({ActionKind::kF, w, i});
    for (int k = 0; k < m - warmup; ++k) {
      list.push_back({ActionKind::kF, w, warmup + k});
      list.push_back({ActionKind::kBW, w, k});
    }
    for (int k = m - warmup; k < m; ++k) list.push_back({ActionKind::kBW, w, k});
  }
  return s;
}

}  // namespace pipetrain::schedule
