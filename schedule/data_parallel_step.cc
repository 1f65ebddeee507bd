#include "schedule/data_parallel_step.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pipetrain::schedule {

double StageAllReduceSeconds(int64_t gradient_bytes, int replicas, double link_bytes_per_s,
                             double link_latency_s) {
  if (replicas <= 1) return 0;
  const double transfer = link_bytes_per_s > 0 ? gradient_bytes / link_bytes_per_s : 0;
  return 2.0 * (replicas - 1) * (link_latency_s + transfer);
}

absl::StatusOr<DataParallelStep> SimulateDataParallelStep(const Schedule& schedule,
                                                         const SimResult& sim,
                                                         const std::vector<double>& allreduce_s) {
  const int stages = schedule.num_stages;
  if (static_cast<int>(allreduce_s.size()) != stages) {
    return absl::InvalidArgumentError(absl::StrCat(allreduce_s.size(), " all-reduce times for ",
                                                   stages, " stages"));
  }
  DataParallelStep out;
  out.last_weight_end.assign(stages, -1);
  for (const TimedAction& t : sim.timeline) {
    const ActionKind kind = t.action.kind;
    if ((kind == ActionKind::kW || kind == ActionKind::kBW) && t.action.stage >= 0 &&
        t.action.stage < stages) {
      out.last_weight_end[t.action.stage] = std::max(out.last_weight_end[t.action.stage], t.end);
    }
  }
  out.step_s = sim.makespan;
  out.allreduce_end.resize(stages);
  for (int s = 0; s < stages; ++s) {
    if (out.last_weight_end[s] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " has no weight-gradient action to sum after"));
    }
    out.allreduce_end[s] = out.last_weight_end[s] + allreduce_s[s];
    out.step_s = std::max(out.step_s, out.allreduce_end[s]);
  }
  return out;
}

}  // namespace pipetrain::schedule
