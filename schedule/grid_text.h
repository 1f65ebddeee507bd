// FormatGrid: the step x worker text grid that validator and simulator errors end with.
// Row k shows the k-th action of every worker's list; marked cells are drawn as [3F12].
// Large schedules are cut to a window around the first marked cell so messages stay readable.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_GRID_TEXT_H_
#define PIPETRAIN_SCHEDULE_GRID_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

// `marked` holds (worker, list index) pairs; indices past a list's end are ignored.
std::string FormatGrid(const Schedule& schedule, const std::vector<std::pair<int, int>>& marked);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_GRID_TEXT_H_
