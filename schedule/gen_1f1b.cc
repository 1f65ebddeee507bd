// 1F1B (PipeDream-flush): worker w warms up with min(p-1-w, m) forwards, then alternates one
// forward and one fused backward, then drains the remaining backwards. Peak min(m, p-w) units.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/generators_classic.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> Make1F1B(const PipelineSpec& spec) {
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
