// GPipe: every worker runs all forwards, then all fused backwards. Peak memory m units.
#include "common/status_macros.h"
#include "schedule/generators_classic.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> MakeGpipe(const PipelineSpec& spec) {
  const int p = spec.num_workers, m = spec.num_microbatches;
  Schedule s = MakeEmptySchedule("gpipe", p, m, LoopPlacement(p, 1));
  for (int w = 0; w < p; ++w) {
    auto& list = s.worker_actions[w];
    list.reserve(2 * m);
    for (int i = 0; i < m; ++i) list.push_back({ActionKind::kF, w, i});
    for (int i = 0; i < m; ++i) list.push_back({ActionKind::kBW, w, i});
  }
  return s;
}

}  // namespace pipetrain::schedule
