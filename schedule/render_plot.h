// RenderPlot: a small x-y chart as a standalone SVG document, for the benchmark suite's figures
// and `pipetrain report`'s memory curves. Lines, step lines (a memory curve holds its value
// until the next point) and labelled markers (a frontier's points), linear or log axes, dashed
// reference lines, a legend, and caption lines under the plot (date, machine, command).
// Output is deterministic (fixed number formatting) and has no dependency beyond absl.
//
// NestSvg places one standalone SVG document inside another at (x, y), so several renderings
// (e.g. a predicted and a measured Gantt chart from RenderSvg) make one figure.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_RENDER_PLOT_H_
#define PIPETRAIN_SCHEDULE_RENDER_PLOT_H_

#include <string>
#include <vector>

namespace pipetrain::schedule {

struct PlotSeries {
  std::string label;  // legend entry; empty = not in the legend
  std::vector<double> x, y;
  enum class Style { kLine, kStep, kMarkers, kLineMarkers } style = Style::kLineMarkers;
  std::string colour;                    // empty: the palette's next colour
  bool dashed = false;
  std::vector<std::string> point_labels;  // optional text beside each point (markers)
};

struct PlotAxis {
  std::string label;
  bool log = false;    // log10 scale; non-positive values are dropped
  double min = 0, max = 0;  // min == max: fit the data (linear axes include 0 if `from_zero`)
  bool from_zero = false;
};

struct Plot {
  std::string title;
  PlotAxis x, y;
  std::vector<PlotSeries> series;
  std::vector<double> x_refs, y_refs;  // dashed grey reference lines (e.g. x = 1, y = 1)
  std::vector<std::string> caption;    // lines under the plot
  int width = 760, height = 460;       // of the plot area plus margins, without the caption
};

std::string RenderPlot(const Plot& plot);

// `inner` (a standalone <svg> document, optionally with an XML prolog) positioned at (x, y) for
// inclusion in an outer <svg>.
std::string NestSvg(const std::string& inner, double x, double y);
// Width and height attributes of a standalone <svg> document (0 if absent).
double SvgWidth(const std::string& svg);
double SvgHeight(const std::string& svg);

// Escapes &, <, >, " for SVG text and attributes.
std::string XmlEscape(const std::string& text);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_RENDER_PLOT_H_
