// Offload figures from the simulator (deterministic): 
//  1. selective offload: peak activation memory vs offloaded fraction on interleaved-1f1b
//     (p = 8, m = 16, v = 2) for k = 0.5, with the straight line from no offload to full
//     offload; written as an SVG plot (argv[1], default docs/offload_selective_curve.svg);
//  2. full offload as p grows (layers per worker fixed, m = 2p): peak and bubble against the
//     same schedule without offload, for k = 0.5, 2/3, 1, 4/3, 1.6 and 1.9 (offload_ratio.h: the copy
//     time out and back over F+B+W), on 1f1b and interleaved-1f1b.
// Prints markdown tables for docs/BENCHMARKS.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "schedule/generator.h"
#include "schedule/offload_pass.h"
#include "schedule/simulator.h"

namespace ps = pipetrain::schedule;

namespace {

double Peak(const ps::SimResult& r) {
  return *std::max_element(r.peak_memory.begin(), r.peak_memory.end());
}

struct Point {
  double fraction;  // offloaded stashes / all stashes
  double peak;
};

std::string Svg(const std::vector<Point>& pts, const std::string& title) {
  const double w = 520, h = 340, l = 60, r = 20, t = 40, b = 50;
  double ymax = 0;
  for (const Point& p : pts) ymax = std::max(ymax, p.peak);
  ymax = std::ceil(ymax + 0.5);
  auto X = [&](double f) { return l + f * (w - l - r); };
  auto Y = [&](double v) { return h - b - v / ymax * (h - t - b); };
  std::string s = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s</text>\n",
      w, h, l, title);
  absl::StrAppend(&s, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                                      "stroke=\"black\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" "
                                      "x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                                      l, h - b, w - r, h - b, l, h - b, l, t));
  for (int i = 0; i <= 4; ++i) {
    const double f = i / 4.0, v = ymax * i / 4.0;
    absl::StrAppend(&s, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.2f"
                                        "</text>\n<text x=\"%.1f\" y=\"%.1f\" "
                                        "text-anchor=\"end\">%.1f</text>\n",
                                        X(f), h - b + 16, f, l - 6, Y(v) + 4, v));
  }
  absl::StrAppend(&s, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                                      "offloaded fraction of stashes</text>\n<text x=\"14\" "
                                      "y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" "
                                      "text-anchor=\"middle\">peak activation memory (units)"
                                      "</text>\n",
                                      (l + w - r) / 2, h - 12, (t + h - b) / 2, (t + h - b) / 2));
  // The straight line between no offload and full offload.
  absl::StrAppend(&s, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                                      "stroke=\"gray\" stroke-dasharray=\"5,4\"/>\n",
                                      X(pts.front().fraction), Y(pts.front().peak),
                                      X(pts.back().fraction), Y(pts.back().peak)));
  std::string path;
  for (const Point& p : pts) {
    absl::StrAppend(&path, path.empty() ? "M" : " L", absl::StrFormat("%.1f %.1f", X(p.fraction), Y(p.peak)));
  }
  absl::StrAppend(&s, "<path d=\"", path, "\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n");
  for (const Point& p : pts) {
    absl::StrAppend(&s, absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#1f77b4\"/>\n",
                                        X(p.fraction), Y(p.peak)));
  }
  absl::StrAppend(&s, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" fill=\"gray\">linear</text>\n",
                                      X(0.62), Y(pts.front().peak + 0.62 * (pts.back().peak - pts.front().peak)) - 6));
  absl::StrAppend(&s, "</svg>\n");
  return s;
}

ps::CostModel WithRatio(const ps::PipelineSpec& spec, int v, double k) {
  ps::PipelineSpec s = spec;
  s.offload_ratio = k;
  (void)v;
  return ps::CostModelFor(s, v);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string svg_path = argc > 1 ? argv[1] : "docs/offload_selective_curve.svg";
  ps::PipelineSpec spec;
  spec.num_workers = 8;
  spec.num_microbatches = 16;
  auto sched = ps::Generate("interleaved-1f1b", spec);
  if (!sched.ok()) {
    std::fprintf(stderr, "%s\n", std::string(sched.status().message()).c_str());
    return 1;
  }
  const ps::CostModel costs = WithRatio(spec, 2, 0.5);
  std::vector<Point> pts;
  std::printf("Selective offload, interleaved-1f1b p=8 m=16 v=2, unit costs, k=0.5\n\n");
  std::printf("| requested fraction | offloaded | peak (units) | linear interpolation | makespan |\n");
  std::printf("|---|---|---|---|---|\n");
  std::vector<std::string> rows;
  double first = 0, last = 0;
  std::vector<std::pair<double, ps::OffloadPlan>> plans;
  for (int i = 0; i <= 16; ++i) {
    ps::OffloadOptions o;
    o.mode = ps::OffloadMode::kFraction;
    o.fraction = i / 16.0;
    auto plan = ps::AddOffload(*sched, costs, o);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s\n", std::string(plan.status().message()).c_str());
      return 1;
    }
    pts.push_back({static_cast<double>(plan->offloaded) / plan->stashes, Peak(plan->sim)});
    plans.push_back({o.fraction, *plan});
  }
  first = pts.front().peak;
  last = pts.back().peak;
  for (size_t i = 0; i < pts.size(); ++i) {
    const double line = first + pts[i].fraction / pts.back().fraction * (last - first);
    std::printf("| %.4f | %d/%d (%.3f) | %.2f | %.2f | %.2f |\n", plans[i].first,
                plans[i].second.offloaded, plans[i].second.stashes, pts[i].fraction, pts[i].peak,
                line, plans[i].second.sim.makespan);
  }
  std::ofstream(svg_path) << Svg(pts, "Selective offload: interleaved-1f1b, p=8, m=16, k=0.5");
  std::printf("\nwrote %s\n\n", svg_path.c_str());

  std::printf("Full offload as p grows (layers per worker fixed, m = 2p, unit costs)\n\n");
  std::printf("| schedule | k | p | peak without | peak with full offload | offloaded | bubble without | bubble with | bubble +pp |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string name : {"1f1b", "interleaved-1f1b"})
  for (double k : {0.5, 2.0 / 3, 1.0, 4.0 / 3, 1.6, 1.9}) {
    for (int p : {4, 8, 16, 32}) {
      ps::PipelineSpec s;
      s.num_workers = p;
      s.num_microbatches = 2 * p;
      auto g = ps::Generate(name, s);
      if (!g.ok()) return 1;
      const ps::CostModel c = WithRatio(s, g->ChunksPerWorker(), k);
      auto base = ps::Simulate(*g, c);
      ps::OffloadOptions o;
      o.mode = ps::OffloadMode::kFull;
      auto plan = ps::AddOffload(*g, c, o);
      if (!base.ok() || !plan.ok()) return 1;
      std::printf("| %s | %.2f | %d | %.2f | %.2f | %d/%d | %.4f | %.4f | %+.2f |\n", name.c_str(),
                  k, p, Peak(*base), Peak(plan->sim), plan->offloaded, plan->stashes,
                  base->bubble_ratio, plan->sim.bubble_ratio,
                  100 * (plan->sim.bubble_ratio - base->bubble_ratio));
    }
  }
  return 0;
}
