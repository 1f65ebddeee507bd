#include "planner/action_overhead.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace pipetrain::planner {
namespace {

// Least squares of y = a + b x; `x` has at least two distinct values.
LinearActionTime FitLine(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mean_x = 0, mean_y = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mean_x += x[i] / n;
    mean_y += y[i] / n;
  }
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
  }
  LinearActionTime line;
  line.per_sample_s = sxy / sxx;
  line.overhead_s = mean_y - line.per_sample_s * mean_x;
  return line;
}

}  // namespace

absl::StatusOr<ActionTimeFit> FitActionTimes(const std::vector<SizedActionTimes>& points) {
  std::set<int> sizes;
  std::vector<double> x, f, b, w;
  for (const SizedActionTimes& p : points) {
    if (p.microbatch_size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("microbatch size ", p.microbatch_size, " is not allowed; allowed: >= 1"));
    }
    for (double t : {p.forward_s, p.backward_input_s, p.backward_weight_s}) {
      if (!std::isfinite(t) || t < 0) {
        return absl::InvalidArgumentError(absl::StrCat("action time ", t, " at microbatch size ",
                                                       p.microbatch_size, " is not >= 0"));
      }
    }
    sizes.insert(p.microbatch_size);
    x.push_back(p.microbatch_size);
    f.push_back(p.forward_s);
    b.push_back(p.backward_input_s);
    w.push_back(p.backward_weight_s);
  }
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fitting overhead + size x per-sample time needs two distinct microbatch sizes, got ",
        sizes.size()));
  }
  return ActionTimeFit{FitLine(x, f), FitLine(x, b), FitLine(x, w)};
}

}  // namespace pipetrain::planner
