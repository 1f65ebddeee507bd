// RenderChromeTrace: a timeline as Chrome trace-event JSON (opens in Perfetto and
// chrome://tracing). One track (thread) per worker in one process; each action is a complete
// ("X") event named by its text form (`3F12`) with stage, microbatch and kind in args.
// Transfers and offloads appear as zero- or short-length events on the same track.
// `us_per_unit` converts the timeline's time unit to microseconds (1e6 when times are seconds).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_RENDER_TRACE_H_
#define PIPETRAIN_SCHEDULE_RENDER_TRACE_H_

#include <string>

#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

std::string RenderChromeTrace(const Schedule& schedule, const SimResult& sim,
                              double us_per_unit = 1e6);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_RENDER_TRACE_H_
