// QuickValidate: the validator's fast path. One dependency-only pass over the schedule (the
// engine's rules, engine.h, without times) that also tracks, per (stage, microbatch), which
// actions have run. Internal to the schedule library.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_QUICK_VALIDATE_H_
#define PIPETRAIN_SCHEDULE_QUICK_VALIDATE_H_

#include "schedule/schedule.h"

namespace pipetrain::schedule {

// True means the schedule passes every ValidateSchedule rule; false means it may not (or
// carries OFFLOAD/RELOAD, which this pass does not model) and the caller must run the full
// validator, which also words the error.
bool QuickValidate(const Schedule& schedule);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_QUICK_VALIDATE_H_
