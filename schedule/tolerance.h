// The slack with which the schedule library compares times and memory units: costs are sums
// of floating-point numbers, so two orders that take the same time can differ in the last bits.
#ifndef PIPETRAIN_SCHEDULE_TOLERANCE_H_
#define PIPETRAIN_SCHEDULE_TOLERANCE_H_

namespace pipetrain::schedule {

inline constexpr double kEps = 1e-9;

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_TOLERANCE_H_
