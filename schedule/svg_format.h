// Number formatting shared by the SVG renderers (render_svg.cc, render_plot.cc).
#ifndef PIPETRAIN_SCHEDULE_SVG_FORMAT_H_
#define PIPETRAIN_SCHEDULE_SVG_FORMAT_H_

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"

namespace pipetrain::schedule {

// A coordinate or length in SVG text: two decimals keep files small and diffs stable.
inline std::string SvgNumber(double v) { return absl::StrFormat("%.2f", v); }

// A round tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over `span`.
inline double RoundTickStep(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double k : {1.0, 2.0, 5.0, 10.0}) {
    if (k * mag >= raw) return k * mag;
  }
  return 10 * mag;
}

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SVG_FORMAT_H_
