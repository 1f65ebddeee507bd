// ASCII renderers for terminals: the time x worker grid of a timeline (like the papers'
// figures) and a short summary of the predictions. They take a Schedule plus a SimResult, so
// the same code draws a simulated plan or a measured run.
//
// Grid: one row per worker, one column per time slot (slot = the shortest compute action).
// A cell holds the kind and microbatch (`F3`, `B3`, `W3`, `BW3`); chunks after a worker's
// first are lower case (`f3`, `b3`) so interleaved and V placements stay readable. A longer
// action continues with `=` cells; `.` is idle. Transfers and offloads take no worker time and
// are not drawn. Times that are not multiples of the slot are rounded to the nearest slot.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_RENDER_ASCII_H_
#define PIPETRAIN_SCHEDULE_RENDER_ASCII_H_

#include <string>
#include <vector>

#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

std::string RenderAscii(const Schedule& schedule, const SimResult& sim);

// Lines: the schedule's shape, makespan, step bubble and per-stage bubble ratio (bubble.h), and
// peak activation memory per worker.
std::string RenderSummary(const Schedule& schedule, const SimResult& sim);

// For each stage, its chunk index on its worker (0 for the worker's lowest stage, 1 next, ...).
std::vector<int> ChunkIndexOfStages(const Schedule& schedule);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_RENDER_ASCII_H_
