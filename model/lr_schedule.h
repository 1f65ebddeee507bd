// LrSchedule: the learning rate of every optimizer step, from training.optimizer's lr_schedule,
// warmup_steps and min_lr_ratio over training.steps. LearningRate is the one function that
// computes it: the workers' optimizer steps and the single-process reference trainer call it
// (so pipelined training stays bitwise equal to the reference), and the coordinator and the
// CLI call it to report the rate.
//
// Step t counts optimizer steps from 1, as AdamW does; a run resumed from checkpoint step-N
// continues with t = N + 1, so the schedule goes on where it stopped.
//
// Thread-safety: plain values and pure functions.
#ifndef PIPETRAIN_MODEL_LR_SCHEDULE_H_
#define PIPETRAIN_MODEL_LR_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::model {

enum class LrScheduleKind { kConstant, kCosine };

// The shape of the schedule; the peak is the caller's (optimizer.learning_rate).
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup_steps = 0;  // steps 1..warmup_steps ramp linearly up to the peak
  int64_t total_steps = 0;   // kCosine: the step that reaches the floor (training.steps)
  double min_lr_ratio = 0;   // kCosine: the floor as a fraction of the peak
};

// The names training.optimizer.lr_schedule accepts, in the order error messages list them.
const std::vector<std::string>& LrScheduleNames();

// The schedule of WithDefaults(spec). InvalidArgument naming training.optimizer.lr_schedule and
// the allowed names for an unknown one.
absl::StatusOr<LrSchedule> LrScheduleOf(const v1::JobSpec& spec);

// The learning rate of step `step` (1-based) for peak rate `peak`:
//   step <= warmup_steps:  peak * step / warmup_steps
//   kConstant:             peak
//   kCosine:               floor + (peak - floor) * (1 + cos(pi * progress)) / 2, with
//                          floor = min_lr_ratio * peak and
//                          progress = (step - warmup_steps) / (total_steps - warmup_steps),
//                          clamped to [0, 1] (the floor from total_steps on).
// Computed in double; callers that need a float convert the result once.
double LearningRate(const LrSchedule& schedule, double peak, int64_t step);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_LR_SCHEDULE_H_
