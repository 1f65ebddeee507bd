#include "schedule/simulator.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/bubble.h"
#include "schedule/engine.h"
#include "schedule/grid_text.h"

namespace pipetrain::schedule {

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const CostModel& costs) {
  SimResult r;
  ActionScan scan;
  // One pass checks the ranges and lays out the timeline; the engine's one pass then fills in
  // the times, per-worker busy time and spans, and the memory curves.
  PT_RETURN_IF_ERROR(CheckEngineInput(schedule, costs, &scan, &r.timeline));
  const EngineRun run = RunEngine(schedule, costs, scan, &r);
  const int p = schedule.num_workers;
  if (run.deadlocked) {
    std::string msg = absl::StrCat("simulation of \"", schedule.name,
                                   "\" deadlocked: no worker can make progress");
    std::vector<std::pair<int, int>> marks;
    for (int w = 0; w < p; ++w) {
      if (run.blocked_at[w] < 0) {
        absl::StrAppend(&msg, "\n  worker ", w, ": finished");
        continue;
      }
      marks.push_back({w, run.blocked_at[w]});
      absl::StrAppend(&msg, "\n  worker ", w, " step ", run.blocked_at[w], " ",
                      ToString(schedule.worker_actions[w][run.blocked_at[w]]), ": ",
                      run.blocked_reason[w]);
    }
    return absl::FailedPreconditionError(absl::StrCat(msg, "\n", FormatGrid(schedule, marks)));
  }
  const double first = run.first_start, last = run.last_end;
  r.makespan = last > first ? last - first : 0.0;
  r.bubble_ratio = PerStageBubble(r.busy, r.span);
  r.step_bubble_ratio = StepBubble(r.busy, r.makespan);
  return r;
}

}  // namespace pipetrain::schedule
