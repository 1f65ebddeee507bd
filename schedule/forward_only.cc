#include "schedule/forward_only.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> MakeForwardOnly(int num_workers, const std::vector<int>& stage_to_worker,
                                         int num_microbatches) {
  if (num_workers < 1 || num_microbatches < 1 || stage_to_worker.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward-only schedule: need >= 1 worker, >= 1 microbatch and >= 1 stage (got ",
        num_workers, ", ", num_microbatches, ", ", stage_to_worker.size(), ")"));
  }
  Schedule s = MakeEmptySchedule(kForwardOnlyName, num_workers, num_microbatches, stage_to_worker);
  s.forward_only = true;
  const int stages = static_cast<int>(stage_to_worker.size());
  for (int w = 0; w < num_workers; ++w) {
    std::vector<std::tuple<int, int, int>> keyed;  // (s + i, -s, i)
    for (int st = 0; st < stages; ++st) {
      if (stage_to_worker[st] != w) continue;
      for (int i = 0; i < num_microbatches; ++i) keyed.emplace_back(st + i, -st, i);
    }
    std::sort(keyed.begin(), keyed.end());
    for (const auto& [key, minus_stage, i] : keyed) {
      s.worker_actions[w].push_back(Action{ActionKind::kF, -minus_stage, i});
    }
  }
  PT_RETURN_IF_ERROR(ValidateSchedule(s));
  return s;
}

CostModel ForwardOnlyCosts(const CostModel& training) {
  CostModel costs = training;
  for (StageCost& c : costs.stages) {
    c.b = c.w = 0;
    c.bw = -1;
    c.activation = c.freed_by_b = 0;
    c.offload_bytes = -1;
  }
  return costs;
}

}  // namespace pipetrain::schedule
