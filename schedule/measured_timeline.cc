#include "schedule/measured_timeline.h"

#include <algorithm>
#include <limits>

#include "schedule/bubble.h"

namespace pipetrain::schedule {

SimResult MeasuredTimeline(const Schedule& schedule,
                           const std::vector<std::vector<MeasuredAction>>& timings) {
  SimResult result;
  const int p = schedule.num_workers;
  result.busy.assign(p, 0.0);
  result.span.assign(p, 0.0);
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& list : timings) {
    for (const MeasuredAction& t : list) origin = std::min(origin, t.start_ns);
  }
  double first = std::numeric_limits<double>::max(), last = 0.0;
  for (int w = 0; w < p && w < static_cast<int>(timings.size()); ++w) {
    if (timings[w].empty()) continue;
    double w_first = std::numeric_limits<double>::max(), w_last = 0.0;
    for (const MeasuredAction& t : timings[w]) {
      const double start = (t.start_ns - origin) * 1e-9, end = (t.end_ns - origin) * 1e-9;
      result.timeline.push_back(TimedAction{t.action, w, start, end});
      if (IsCompute(t.action.kind)) result.busy[w] += end - start;
      w_first = std::min(w_first, start);
      w_last = std::max(w_last, end);
    }
    result.span[w] = w_last - w_first;
    first = std::min(first, w_first);
    last = std::max(last, w_last);
  }
  result.makespan = last > first ? last - first : 0.0;
  result.bubble_ratio = PerStageBubble(result.busy, result.span);
  result.step_bubble_ratio = StepBubble(result.busy, result.makespan);
  return result;
}

}  // namespace pipetrain::schedule
