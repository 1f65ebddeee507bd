#include "coordinator/schedule/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/schedule/engine.h"
#include "coordinator/schedule/grid_text.h"

namespace pipetrain::schedule {

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const CostModel& costs) {
  PT_RETURN_IF_ERROR(CheckEngineInput(schedule, costs));
  EngineRun run = RunEngine(schedule, costs);
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

  SimResult r;
  r.busy.assign(p, 0.0);
  r.span.assign(p, 0.0);
  r.peak_memory.assign(p, 0.0);
  r.memory_curve.resize(p);
  size_t total = 0;
  for (const auto& list : schedule.worker_actions) total += list.size();
  r.timeline.reserve(total);
  double first = std::numeric_limits<double>::infinity(), last = 0.0;
  for (int w = 0; w < p; ++w) {
    const auto& list = schedule.worker_actions[w];
    double w_first = std::numeric_limits<double>::infinity(), w_last = 0.0;
    for (size_t k = 0; k < list.size(); ++k) {
      const double start = run.start[w][k], end = run.end[w][k];
      r.timeline.push_back({list[k], w, start, end});
      if (!IsCompute(list[k].kind)) continue;
      r.busy[w] += end - start;
      w_first = std::min(w_first, start);
      w_last = std::max(w_last, end);
    }
    if (w_last >= w_first) {
      r.span[w] = w_last - w_first;
      first = std::min(first, w_first);
      last = std::max(last, w_last);
    }
    // Memory step function; at equal times frees go first (an action ending at t and the next
    // starting at t are never resident together).
    auto& ev = run.memory_events[w];
    auto before = [](const MemoryEvent& a, const MemoryEvent& b) {
      return a.time < b.time || (a.time == b.time && a.delta < b.delta);
    };
    if (!std::is_sorted(ev.begin(), ev.end(), before))
      std::stable_sort(ev.begin(), ev.end(), before);
    double held = 0.0, peak = 0.0;
    auto& curve = r.memory_curve[w];
    curve.push_back({0.0, 0.0});
    for (const MemoryEvent& e : ev) {
      held += e.delta;
      if (std::abs(held) < 1e-12) held = 0.0;
      peak = std::max(peak, held);
      if (curve.back().time == e.time) {
        curve.back().units = held;
      } else {
        curve.push_back({e.time, held});
      }
    }
    r.peak_memory[w] = peak;
  }
  r.makespan = last > first ? last - first : 0.0;
  const double max_span = *std::max_element(r.span.begin(), r.span.end());
  const int busiest =
      static_cast<int>(std::max_element(r.busy.begin(), r.busy.end()) - r.busy.begin());
  r.bubble_ratio = max_span > 0 ? 1.0 - r.busy[busiest] / max_span : 0.0;
  return r;
}

}  // namespace pipetrain::schedule
