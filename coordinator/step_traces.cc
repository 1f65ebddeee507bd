#include "coordinator/step_traces.h"

#include <iterator>
#include <utility>

namespace pipetrain::coordinator {

void StepTraceKeeper::Add(v1::StepTrace trace) {
  const int step = trace.step();
  traces_[step] = std::move(trace);
  changed_ = true;
  while (static_cast<int>(traces_.size()) > keep_first_ + keep_last_) {
    // The oldest trace that is not among the first `keep_first_`.
    traces_.erase(std::next(traces_.begin(), keep_first_));
  }
}

std::optional<v1::StepTrace> StepTraceKeeper::Get(int step) const {
  if (traces_.empty()) return std::nullopt;
  if (step == -1) return traces_.rbegin()->second;
  auto it = traces_.find(step);
  if (it == traces_.end()) return std::nullopt;
  return it->second;
}

std::vector<int> StepTraceKeeper::steps() const {
  std::vector<int> steps;
  for (const auto& [step, trace] : traces_) steps.push_back(step);
  return steps;
}

std::vector<v1::StepTrace> StepTraceKeeper::traces() const {
  std::vector<v1::StepTrace> all;
  for (const auto& [step, trace] : traces_) all.push_back(trace);
  return all;
}

bool StepTraceKeeper::TakeChanged() { return std::exchange(changed_, false); }

}  // namespace pipetrain::coordinator
