#include "schedule/render_svg.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "schedule/render_ascii.h"
#include "schedule/render_plot.h"
#include "schedule/svg_format.h"

namespace pipetrain::schedule {
namespace {

constexpr double kMarginLeft = 70, kMarginTop = 40, kRow = 26, kBox = 22, kMaxWidth = 1200;

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
  const double axis_y = kMarginTop + rows * kRow + 6;
  const double width = kMarginLeft + plot_w + 30, height = axis_y + 80;
  std::string out = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
                                 SvgNumber(width), "\" height=\"", SvgNumber(height),
                                 "\" font-family=\"sans-serif\" font-size=\"11\">\n",
                                 "<rect width=\"100%\" height=\"100%\" "
                                 "fill=\"white\"/>\n");
  if (options.title.empty()) {
    absl::StrAppend(&out, "<text x=\"", SvgNumber(kMarginLeft), "\" y=\"18\" font-size=\"13\">",
                    schedule.name, ": p=", p, " m=", schedule.num_microbatches,
                    " stages=", schedule.num_stages, "  makespan ",
                    absl::StrFormat("%.6g", sim.makespan), "  bubble ",
                    absl::StrFormat("%.4f", sim.bubble_ratio), "</text>\n");
  } else {
    absl::StrAppend(&out, "<text x=\"", SvgNumber(kMarginLeft), "\" y=\"18\" font-size=\"13\">",
                    XmlEscape(options.title), "</text>\n");
  }
  for (int w = 0; w < p; ++w) {
    absl::StrAppend(&out, "<text x=\"8\" y=\"",
                    SvgNumber(kMarginTop + row_of(w) * kRow + kBox * 0.7), "\">worker ", w,
                    "</text>\n");
    if (lanes) {
      absl::StrAppend(&out, "<text x=\"8\" y=\"",
                      SvgNumber(kMarginTop + (row_of(w) + 1) * kRow + kBox * 0.7),
                      "\" fill=\"#555\">  sums</text>\n");
    }
  }
  for (const GradientSumInterval& g : options.gradient_sums) {
    if (g.worker < 0 || g.worker >= p) continue;
    const double x = kMarginLeft + g.start * scale, y = kMarginTop + (row_of(g.worker) + 1) * kRow;
    const double wd = std::max(0.5, (g.end - g.start) * scale);
    absl::StrAppend(&out, "<rect x=\"", SvgNumber(x), "\" y=\"", SvgNumber(y + 3), "\" width=\"",
                    SvgNumber(wd), "\" height=\"", SvgNumber(kBox - 6),
                    "\" fill=\"#9a9a9a\" stroke=\"#333\" "
                    "stroke-width=\"0.5\"><title>gradient sum of stage ",
                    g.stage, " [", SvgNumber(g.start), ", ", SvgNumber(g.end),
                    ")</title></rect>\n");
    if (wd >= 40) {
      absl::StrAppend(&out, "<text x=\"", SvgNumber(x + wd / 2), "\" y=\"",
                      SvgNumber(y + kBox * 0.7), "\" text-anchor=\"middle\" fill=\"#fff\">sum ",
                      g.stage, "</text>\n");
    }
  }
  for (const TimedAction& t : sim.timeline) {
    if (!IsCompute(t.action.kind)) continue;
    const double x = kMarginLeft + t.start * scale, y = kMarginTop + row_of(t.worker) * kRow;
    const double wd = std::max(0.5, (t.end - t.start) * scale);
    const int c = chunk[t.action.stage];
    absl::StrAppend(&out, "<rect x=\"", SvgNumber(x), "\" y=\"", SvgNumber(y), "\" width=\"",
                    SvgNumber(wd), "\" height=\"", SvgNumber(kBox), "\" fill=\"",
                    Colour(t.action.kind, c), "\" stroke=\"#333\" stroke-width=\"0.5\"><title>",
                    ToString(t.action), " [", SvgNumber(t.start), ", ", SvgNumber(t.end),
                    ")</title></rect>\n");
    if (wd >= 12) {
      absl::StrAppend(&out, "<text x=\"", SvgNumber(x + wd / 2), "\" y=\"",
                      SvgNumber(y + kBox * 0.7), "\" text-anchor=\"middle\" fill=\"",
                      c > 0 ? "#111" : "#fff", "\">", t.action.microbatch, "</text>\n");
    }
  }
  // Time axis.
  absl::StrAppend(&out, "<line x1=\"", SvgNumber(kMarginLeft), "\" y1=\"", SvgNumber(axis_y),
                  "\" x2=\"", SvgNumber(kMarginLeft + plot_w), "\" y2=\"", SvgNumber(axis_y),
                  "\" stroke=\"#000\"/>\n");
  const double step = RoundTickStep(end, 10);
  for (int k = 0; k * step <= end + 1e-9; ++k) {
    const double x = kMarginLeft + k * step * scale;
    absl::StrAppend(&out, "<line x1=\"", SvgNumber(x), "\" y1=\"", SvgNumber(axis_y), "\" x2=\"",
                    SvgNumber(x), "\" y2=\"", SvgNumber(axis_y + 5),
                    "\" stroke=\"#000\"/>\n<text x=\"", SvgNumber(x), "\" y=\"",
                    SvgNumber(axis_y + 17), "\" text-anchor=\"middle\">",
                    absl::StrFormat("%.6g", k * step), "</text>\n");
  }
  absl::StrAppend(&out, "<text x=\"", SvgNumber(kMarginLeft + plot_w), "\" y=\"",
                  SvgNumber(axis_y + 30), "\" text-anchor=\"end\">", XmlEscape(options.time_label),
                  "</text>\n");
  // Legend.
  const double ly = axis_y + 45;
  double lx = kMarginLeft;
  const std::pair<ActionKind, const char*> items[] = {
      {ActionKind::kF, "F"}, {ActionKind::kB, "B"}, {ActionKind::kW, "W"}, {ActionKind::kBW, "BW"}};
  for (const auto& [kind, name] : items) {
    for (int c = 0; c < 2; ++c) {
      absl::StrAppend(&out, "<rect x=\"", SvgNumber(lx), "\" y=\"", SvgNumber(ly),
                      "\" width=\"14\" height=\"14\" "
                      "fill=\"",
                      Colour(kind, c), "\" stroke=\"#333\" stroke-width=\"0.5\"/>\n");
      lx += 16;
    }
    absl::StrAppend(&out, "<text x=\"", SvgNumber(lx + 2), "\" y=\"", SvgNumber(ly + 11), "\">",
                    name, "</text>\n");
    lx += 40;
  }
  if (lanes) {
    absl::StrAppend(&out, "<rect x=\"", SvgNumber(lx), "\" y=\"", SvgNumber(ly),
                    "\" width=\"14\" height=\"14\" fill=\"#9a9a9a\" stroke=\"#333\" "
                    "stroke-width=\"0.5\"/>\n<text x=\"",
                    SvgNumber(lx + 18), "\" y=\"", SvgNumber(ly + 11),
                    "\">gradient sum across replicas</text>\n");
    lx += 200;
  }
  absl::StrAppend(&out, "<text x=\"", SvgNumber(lx + 10), "\" y=\"", SvgNumber(ly + 11),
                  "\">dark: chunk 0, light: chunk 1+ of the worker</text>\n</svg>\n");
  return out;
}

}  // namespace pipetrain::schedule
