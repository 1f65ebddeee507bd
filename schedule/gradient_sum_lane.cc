#include "schedule/gradient_sum_lane.h"

namespace pipetrain::schedule {

std::vector<GradientSumInterval> PredictedGradientSums(const Schedule& schedule,
                                                       const DataParallelStep& step) {
  std::vector<GradientSumInterval> out;
  for (size_t s = 0; s < step.allreduce_end.size() && s < step.last_weight_end.size(); ++s) {
    if (s >= schedule.stage_to_worker.size()) break;
    out.push_back({schedule.stage_to_worker[s], static_cast<int>(s), step.last_weight_end[s],
                   step.allreduce_end[s]});
  }
  return out;
}

}  // namespace pipetrain::schedule
