// The two bubble ratios pipetrain reports for a timed schedule (simulated or measured).
//
//   step bubble       1 - total work / (p x step time): the share of the p workers' step time
//                     spent idle, i.e. what a user loses. Step time = first start to last end
//                     over all workers.
//   per-stage bubble  1 - busy / span of the busiest worker, its span counted from its own first
//                     action to its own last: the number the zero-bubble and V-shape papers (and
//                     their scripts) print. It ignores the time a worker waits before its first
//                     action, so it can be 0 while the step is longer than the work.
//
// Both are 0 for an empty timeline. RankBubbles splits the step bubble by worker. Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_BUBBLE_H_
#define PIPETRAIN_SCHEDULE_BUBBLE_H_

#include <vector>

namespace pipetrain::schedule {

// busy[w]: worker w's summed compute time; step_time: first start to last end over all workers.
double StepBubble(const std::vector<double>& busy, double step_time);

// busy[w] as above; span[w]: worker w's last end - its own first start.
double PerStageBubble(const std::vector<double>& busy, const std::vector<double>& span);

// Per worker: 1 - busy[w] / step_time, the share of the step worker w idles (clamped to 0..1).
// Their mean is StepBubble(busy, step_time) when no worker is busy longer than the step. Empty
// when step_time <= 0.
std::vector<double> RankBubbles(const std::vector<double>& busy, double step_time);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_BUBBLE_H_
