#include "model/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/job_model.h"

namespace pipetrain::model {

const std::vector<std::string>& LrScheduleNames() {
  static const auto* const kNames = new std::vector<std::string>{"constant", "cosine"};
  return *kNames;
}

absl::StatusOr<LrSchedule> LrScheduleOf(const v1::JobSpec& spec) {
  const v1::JobSpec s = WithDefaults(spec);
  const v1::OptimizerSpec& o = s.training().optimizer();
  LrSchedule schedule;
  if (o.lr_schedule() == "constant") {
    schedule.kind = LrScheduleKind::kConstant;
  } else if (o.lr_schedule() == "cosine") {
    schedule.kind = LrScheduleKind::kCosine;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("training.optimizer.lr_schedule: \"", o.lr_schedule(),
                     "\" is not allowed; allowed: ", absl::StrJoin(LrScheduleNames(), ", ")));
  }
  schedule.warmup_steps = o.warmup_steps();
  schedule.total_steps = s.training().steps();
  schedule.min_lr_ratio = o.min_lr_ratio();
  return schedule;
}

double LearningRate(const LrSchedule& schedule, double peak, int64_t step) {
  const int64_t warmup = schedule.warmup_steps;
  if (warmup > 0 && step <= warmup) {
    return peak * static_cast<double>(step) / static_cast<double>(warmup);
  }
  if (schedule.kind == LrScheduleKind::kConstant) return peak;
  const double floor = schedule.min_lr_ratio * peak;
  const int64_t decay_steps = schedule.total_steps - warmup;
  // No decay phase (warmup takes every step): the floor past the end, like a finished cosine.
  const double progress =
      decay_steps > 0
          ? std::clamp(static_cast<double>(step - warmup) / static_cast<double>(decay_steps), 0.0,
                       1.0)
          : 1.0;
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace pipetrain::model
