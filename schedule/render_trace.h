// RenderChromeTrace: a timeline as Chrome trace-event JSON (opens in Perfetto and
// chrome://tracing). One track (thread) per worker in one process; each action is a complete
// ("X") event named by its text form (`3F12`) with stage, microbatch and kind in args.
// Transfers and offloads appear as zero- or short-length events on the same track.
// `us_per_unit` converts the timeline's time unit to microseconds (1e6 when times are seconds).
// Data parallelism: one process per replica ("replica q"), each with its workers' tracks and,
// after them, a "worker w: gradient sums" track per worker holding that worker's stage sums
// across the replicas (gradient_sum_lane.h), so the sums' overlap with the cool-down shows.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_RENDER_TRACE_H_
#define PIPETRAIN_SCHEDULE_RENDER_TRACE_H_

#include <string>
#include <vector>

#include "schedule/gradient_sum_lane.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

std::string RenderChromeTrace(const Schedule& schedule, const SimResult& sim,
                              double us_per_unit = 1e6);

// One replica's step (its workers are the schedule's) and its gradient sums.
struct ReplicaTimeline {
  SimResult sim;
  std::vector<GradientSumInterval> gradient_sums;
};
std::string RenderChromeTrace(const Schedule& schedule,
                              const std::vector<ReplicaTimeline>& replicas,
                              double us_per_unit = 1e6);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_RENDER_TRACE_H_
