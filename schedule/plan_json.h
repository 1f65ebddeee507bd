// PlanToJson: a plan (schedule) and its predictions as one JSON document with plain field
// names, for tools and for `pipetrain plan --format json`:
//   schedule, workers, stages, microbatches, chunks_per_worker, placement (stage -> worker),
//   units {time, memory}, predictions {makespan, bubble_ratio (per stage),
//   step_bubble_ratio (1 - work / (workers x makespan); bubble.h), peak_activation_units[w],
//   peak_activation_bytes[w] (when bytes_per_unit > 0), busy[w], span[w]},
//   actions[w] (text-form tokens), timeline [{worker, action, start, end}].
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_PLAN_JSON_H_
#define PIPETRAIN_SCHEDULE_PLAN_JSON_H_

#include <string>

#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

// Pretty-printed with two-space indentation, ending in a newline.
std::string PlanToJson(const Schedule& schedule, const SimResult& sim, const CostModel& costs);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_PLAN_JSON_H_
