#include "schedule/bubble.h"

#include <algorithm>
#include <numeric>

namespace pipetrain::schedule {

double StepBubble(const std::vector<double>& busy, double step_time) {
  if (busy.empty() || step_time <= 0) return 0.0;
  const double work = std::accumulate(busy.begin(), busy.end(), 0.0);
  return 1.0 - work / (static_cast<double>(busy.size()) * step_time);
}

double PerStageBubble(const std::vector<double>& busy, const std::vector<double>& span) {
  if (busy.empty() || span.empty()) return 0.0;
  const double longest = *std::max_element(span.begin(), span.end());
  const double busiest = *std::max_element(busy.begin(), busy.end());
  return longest > 0 ? 1.0 - busiest / longest : 0.0;
}

std::vector<double> RankBubbles(const std::vector<double>& busy, double step_time) {
  std::vector<double> bubbles;
  if (step_time <= 0) return bubbles;
  for (double b : busy) bubbles.push_back(std::clamp(1.0 - b / step_time, 0.0, 1.0));
  return bubbles;
}

}  // namespace pipetrain::schedule
