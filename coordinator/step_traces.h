// StepTraceKeeper: the measured timelines (every rank's StepReport with its action timings) a
// job keeps for `pipetrain trace` and `pipetrain report`. Keeping every step would grow without
// bound, so it keeps the first `keep_first` steps (warm-up, where the profile comes from) and the
// newest `keep_last` (the steady state, and the last step before a failure).
//
// Thread-safety: not thread-safe; the job manager calls it under its lock.
#ifndef PIPETRAIN_COORDINATOR_STEP_TRACES_H_
#define PIPETRAIN_COORDINATOR_STEP_TRACES_H_

#include <map>
#include <optional>
#include <vector>

#include "pipetrain/v1/coordinator.pb.h"

namespace pipetrain::coordinator {

class StepTraceKeeper {
 public:
  explicit StepTraceKeeper(int keep_first = 2, int keep_last = 3)
      : keep_first_(keep_first), keep_last_(keep_last) {}

  // Adds a complete step (replacing a kept trace of the same step) and drops what is no longer
  // among the first or the newest.
  void Add(v1::StepTrace trace);
  // `step` >= 0: that step's trace; -1: the newest. nullopt if not kept.
  std::optional<v1::StepTrace> Get(int step) const;
  std::vector<int> steps() const;              // kept steps, ascending
  std::vector<v1::StepTrace> traces() const;   // kept traces, by step
  bool empty() const { return traces_.empty(); }

  // True if Add changed what is kept since the last call.
  bool TakeChanged();

 private:
  const int keep_first_;
  const int keep_last_;
  std::map<int, v1::StepTrace> traces_;
  bool changed_ = false;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_STEP_TRACES_H_
