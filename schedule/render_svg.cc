#include "schedule/render_svg.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "schedule/render_ascii.h"
#include "schedule/render_plot.h"

namespace pipetrain::schedule {
namespace {

constexpr double kLeft = 70, kTop = 40, kRow = 26, kBox = 22, kMaxWidth = 1200;

// {chunk 0, later chunks} per compute kind.
const char* Colour(ActionKind kind, int chunk) {
  const bool light = chunk > 0;
  switch (kind) {
    case ActionKind::kF:
    case ActionKind::kOverlapF:
      return light ? "#a9c4eb" : "#3e6fc2";
    case ActionKind::kB:
      return light ? "#9fdcc9" : "#1f9a78";
    case ActionKind::kW:
      return light ? "#d2bdf0" : "#7b4fc0";
    default:
      return light ? "#f6c99a" : "#e07b1f";
  }
}

std::string F(double x) { return absl::StrFormat("%.2f", x); }

// A round tick step giving about `target` ticks over `span`.
double TickStep(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double k : {1.0, 2.0, 5.0, 10.0}) {
    if (k * mag >= raw) return k * mag;
  }
  return 10 * mag;
}

}  // namespace

std::string RenderSvg(const Schedule& schedule, const SimResult& sim) {
  return RenderSvg(schedule, sim, SvgOptions{});
}

std::string RenderSvg(const Schedule& schedule, const SimResult& sim, const SvgOptions& options) {
  const std::vector<int> chunk = ChunkIndexOfStages(schedule);
  double end = options.time_end;
  if (end <= 0) {
    for (const TimedAction& t : sim.timeline) end = std::max(end, t.end);
  }
  if (end <= 0) end = 1;
  const double scale =
      options.px_per_time > 0 ? options.px_per_time : std::clamp(kMaxWidth / end, 1.0, 40.0);
  const int p = schedule.num_workers;
  // With gradient sums, worker w's row is 2w and its sum lane 2w + 1.
  const bool lanes = !options.gradient_sums.empty();
  const int rows = lanes ? 2 * p : p;
  auto row_of = [lanes](int worker) { return lanes ? 2 * worker : worker; };
  if (options.time_end <= 0) {
    for (const GradientSumInterval& g : options.gradient_sums) end = std::max(end, g.end);
  }
  const double plot_w = end * scale;
  const double axis_y = kTop + rows * kRow + 6;
  const double width = kLeft + plot_w + 30, height = axis_y + 80;
  std::string out =
      absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", F(width), "\" height=\"",
                   F(height), "\" font-family=\"sans-serif\" font-size=\"11\">\n",
                   "<rect width=\"100%\" height=\"100%\" "
                   "fill=\"white\"/>\n");
  if (options.title.empty()) {
    absl::StrAppend(&out, "<text x=\"", F(kLeft), "\" y=\"18\" font-size=\"13\">",
                    schedule.name, ": p=", p, " m=", schedule.num_microbatches,
                    " stages=", schedule.num_stages, "  makespan ",
                    absl::StrFormat("%.6g", sim.makespan), "  bubble ",
                    absl::StrFormat("%.4f", sim.bubble_ratio), "</text>\n");
  } else {
    absl::StrAppend(&out, "<text x=\"", F(kLeft), "\" y=\"18\" font-size=\"13\">",
                    XmlEscape(options.title), "</text>\n");
  }
  for (int w = 0; w < p; ++w) {
    absl::StrAppend(&out, "<text x=\"8\" y=\"", F(kTop + row_of(w) * kRow + kBox * 0.7),
                    "\">worker ", w, "</text>\n");
    if (lanes) {
      absl::StrAppend(&out, "<text x=\"8\" y=\"", F(kTop + (row_of(w) + 1) * kRow + kBox * 0.7),
                      "\" fill=\"#555\">  sums</text>\n");
    }
  }
  for (const GradientSumInterval& g : options.gradient_sums) {
    if (g.worker < 0 || g.worker >= p) continue;
    const double x = kLeft + g.start * scale, y = kTop + (row_of(g.worker) + 1) * kRow;
    const double wd = std::max(0.5, (g.end - g.start) * scale);
    absl::StrAppend(&out, "<rect x=\"", F(x), "\" y=\"", F(y + 3), "\" width=\"", F(wd),
                    "\" height=\"", F(kBox - 6), "\" fill=\"#9a9a9a\" stroke=\"#333\" "
                    "stroke-width=\"0.5\"><title>gradient sum of stage ", g.stage, " [", F(g.start),
                    ", ", F(g.end), ")</title></rect>\n");
    if (wd >= 40) {
      absl::StrAppend(&out, "<text x=\"", F(x + wd / 2), "\" y=\"", F(y + kBox * 0.7),
                      "\" text-anchor=\"middle\" fill=\"#fff\">sum ", g.stage, "</text>\n");
    }
  }
  for (const TimedAction& t : sim.timeline) {
    if (!IsCompute(t.action.kind)) continue;
    const double x = kLeft + t.start * scale, y = kTop + row_of(t.worker) * kRow;
    const double wd = std::max(0.5, (t.end - t.start) * scale);
    const int c = chunk[t.action.stage];
    absl::StrAppend(&out, "<rect x=\"", F(x), "\" y=\"", F(y), "\" width=\"", F(wd), "\" height=\"",
                    F(kBox), "\" fill=\"", Colour(t.action.kind, c),
                    "\" stroke=\"#333\" stroke-width=\"0.5\"><title>", ToString(t.action), " [",
                    F(t.start), ", ", F(t.end), ")</title></rect>\n");
    if (wd >= 12) {
      absl::StrAppend(&out, "<text x=\"", F(x + wd / 2), "\" y=\"", F(y + kBox * 0.7),
                      "\" text-anchor=\"middle\" fill=\"", c > 0 ? "#111" : "#fff", "\">",
                      t.action.microbatch, "</text>\n");
    }
  }
  // Time axis.
  absl::StrAppend(&out, "<line x1=\"", F(kLeft), "\" y1=\"", F(axis_y), "\" x2=\"",
                  F(kLeft + plot_w), "\" y2=\"", F(axis_y), "\" stroke=\"#000\"/>\n");
  const double step = TickStep(end, 10);
  for (int k = 0; k * step <= end + 1e-9; ++k) {
    const double x = kLeft + k * step * scale;
    absl::StrAppend(&out, "<line x1=\"", F(x), "\" y1=\"", F(axis_y), "\" x2=\"", F(x), "\" y2=\"",
                    F(axis_y + 5), "\" stroke=\"#000\"/>\n<text x=\"", F(x), "\" y=\"",
                    F(axis_y + 17), "\" text-anchor=\"middle\">", absl::StrFormat("%.6g", k * step),
                    "</text>\n");
  }
  absl::StrAppend(&out, "<text x=\"", F(kLeft + plot_w), "\" y=\"", F(axis_y + 30),
                  "\" text-anchor=\"end\">", XmlEscape(options.time_label), "</text>\n");
  // Legend.
  const double ly = axis_y + 45;
  double lx = kLeft;
  const std::pair<ActionKind, const char*> items[] = {
      {ActionKind::kF, "F"}, {ActionKind::kB, "B"}, {ActionKind::kW, "W"}, {ActionKind::kBW, "BW"}};
  for (const auto& [kind, name] : items) {
    for (int c = 0; c < 2; ++c) {
      absl::StrAppend(&out, "<rect x=\"", F(lx), "\" y=\"", F(ly),
                      "\" width=\"14\" height=\"14\" "
                      "fill=\"",
                      Colour(kind, c), "\" stroke=\"#333\" stroke-width=\"0.5\"/>\n");
      lx += 16;
    }
    absl::StrAppend(&out, "<text x=\"", F(lx + 2), "\" y=\"", F(ly + 11), "\">", name, "</text>\n");
    lx += 40;
  }
  if (lanes) {
    absl::StrAppend(&out, "<rect x=\"", F(lx), "\" y=\"", F(ly),
                    "\" width=\"14\" height=\"14\" fill=\"#9a9a9a\" stroke=\"#333\" "
                    "stroke-width=\"0.5\"/>\n<text x=\"", F(lx + 18), "\" y=\"", F(ly + 11),
                    "\">gradient sum across replicas</text>\n");
    lx += 200;
  }
  absl::StrAppend(&out, "<text x=\"", F(lx + 10), "\" y=\"", F(ly + 11),
                  "\">dark: chunk 0, light: chunk 1+ of the worker</text>\n</svg>\n");
  return out;
}

}  // namespace pipetrain::schedule
