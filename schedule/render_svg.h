// RenderSvg: a Gantt chart of a timeline as a standalone SVG document, like the papers'
// figures: one row per worker, one box per compute action (F blue, B teal, W purple, BW
// orange) with the microbatch number inside; a worker's later chunks use a lighter shade of
// the same colour so a V or an interleaving is visible. A time axis and a legend are drawn
// below. With data parallelism's gradient sums (SvgOptions::gradient_sums), every worker's row
// gets a lane under it with one grey box per stage sum ("sum s"). Output is deterministic
// (fixed number formatting), so it can be golden-tested.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_RENDER_SVG_H_
#define PIPETRAIN_SCHEDULE_RENDER_SVG_H_

#include <string>
#include <vector>

#include "schedule/gradient_sum_lane.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

std::string RenderSvg(const Schedule& schedule, const SimResult& sim);

// For figures that set several charts on one time scale (predicted next to measured).
struct SvgOptions {
  std::string title;         // replaces the default title line when non-empty
  double px_per_time = 0;    // horizontal scale; 0 = fit the timeline into about 1200 px
  double time_end = 0;       // axis length in time units; 0 = the timeline's last end
  std::string time_label = "time";
  // Data parallelism: the gradient sums to draw in a lane under their worker's row (empty: no
  // lanes, the plain chart).
  std::vector<GradientSumInterval> gradient_sums;
};
std::string RenderSvg(const Schedule& schedule, const SimResult& sim, const SvgOptions& options);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_RENDER_SVG_H_
