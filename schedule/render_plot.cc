#include "schedule/render_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "schedule/svg_format.h"

namespace pipetrain::schedule {
namespace {

constexpr double kLeft = 78, kTop = 40, kBottom = 56, kRightPlain = 24;
constexpr double kCharWidth = 6.2;  // average glyph width of the 11 px sans-serif font
constexpr double kCaptionLine = 15;

const char* const kPalette[] = {"#3e6fc2", "#e07b1f", "#1f9a78", "#c23e5a", "#7b4fc0",
                                "#8c6d31", "#d45fb0", "#5b8c2a", "#2aa3c2", "#666666",
                                "#b8860b", "#222222"};

// Tick label: up to 4 significant digits, no trailing zeros.
std::string TickLabel(double v) {
  if (std::abs(v) < 1e-12) return "0";
  if (std::abs(v) >= 1e4 && std::abs(v) < 1e9 && v == std::floor(v)) {
    return absl::StrFormat("%.0f", v);  // 10000, not 1e+04
  }
  return absl::StrFormat("%.4g", v);
}

// Maps data values to pixels along one axis.
struct Scale {
  bool log = false;
  double lo = 0, hi = 1;      // data range (positive when log)
  double p0 = 0, p1 = 1;      // pixel range
  double operator()(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                         : (v - lo) / (hi - lo);
    return p0 + t * (p1 - p0);
  }
  bool Shows(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

Scale FitAxis(const PlotAxis& axis, const std::vector<double>& values, double p0, double p1) {
  Scale s;
  s.log = axis.log;
  s.p0 = p0;
  s.p1 = p1;
  if (axis.max > axis.min && (!axis.log || axis.min > 0)) {
    s.lo = axis.min;
    s.hi = axis.max;
    return s;
  }
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    if (!s.Shows(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (!std::isfinite(lo)) {
    lo = axis.log ? 1 : 0;
    hi = axis.log ? 10 : 1;
  }
  if (axis.log) {
    s.lo = std::pow(10.0, std::floor(std::log10(lo)));
    s.hi = std::pow(10.0, std::ceil(std::log10(hi)));
    if (s.hi <= s.lo) s.hi = s.lo * 10;
    return s;
  }
  if (axis.from_zero) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (hi - lo < 1e-12) {
    const double pad = std::abs(hi) > 0 ? std::abs(hi) * 0.1 : 1;
    lo -= pad;
    hi += pad;
  }
  const double pad = (hi - lo) * 0.06;
  s.lo = (axis.from_zero && lo >= 0) ? lo : lo - pad;
  s.hi = hi + pad;
  const double step = RoundTickStep(s.hi - s.lo, 6);
  s.lo = std::floor(s.lo / step) * step;
  s.hi = std::ceil(s.hi / step) * step;
  return s;
}

std::vector<double> Ticks(const Scale& s) {
  std::vector<double> ticks;
  if (s.log) {
    const int a = static_cast<int>(std::floor(std::log10(s.lo) + 1e-9));
    const int b = static_cast<int>(std::ceil(std::log10(s.hi) - 1e-9));
    const bool fine = b - a <= 2;
    for (int e = a; e <= b; ++e) {
      for (double k : {1.0, 2.0, 5.0}) {
        if (k != 1.0 && !fine) continue;
        const double v = k * std::pow(10.0, e);
        if (v >= s.lo * (1 - 1e-9) && v <= s.hi * (1 + 1e-9)) ticks.push_back(v);
      }
    }
    return ticks;
  }
  const double step = RoundTickStep(s.hi - s.lo, 6);
  for (double v = std::ceil(s.lo / step - 1e-9) * step; v <= s.hi + step * 1e-9; v += step) {
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

}  // namespace

std::string XmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string RenderPlot(const Plot& plot) {
  size_t legend_chars = 0;
  std::vector<double> xs(plot.x_refs), ys(plot.y_refs);
  for (const PlotSeries& s : plot.series) {
    legend_chars = std::max(legend_chars, s.label.size());
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
  }
  const double right = legend_chars > 0 ? 50 + kCharWidth * legend_chars : kRightPlain;
  const double w = plot.width, h = plot.height;
  const double x0 = kLeft, x1 = w - right, y0 = h - kBottom, y1 = kTop;
  const Scale sx = FitAxis(plot.x, xs, x0, x1);
  const Scale sy = FitAxis(plot.y, ys, y0, y1);
  const double total_h = h + kCaptionLine * plot.caption.size() + (plot.caption.empty() ? 0 : 8);

  std::string out = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", SvgNumber(w),
                                 "\" height=\"", SvgNumber(total_h),
                                 "\" font-family=\"sans-serif\" font-size=\"11\">\n",
                                 "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  absl::StrAppend(&out, "<text x=\"", SvgNumber(x0), "\" y=\"22\" font-size=\"14\">",
                  XmlEscape(plot.title), "</text>\n");
  // Grid, ticks and tick labels.
  for (double t : Ticks(sx)) {
    const double px = sx(t);
    absl::StrAppend(&out, "<line x1=\"", SvgNumber(px), "\" y1=\"", SvgNumber(y1), "\" x2=\"",
                    SvgNumber(px), "\" y2=\"", SvgNumber(y0), "\" stroke=\"#e4e4e4\"/>\n<text x=\"",
                    SvgNumber(px), "\" y=\"", SvgNumber(y0 + 15), "\" text-anchor=\"middle\">",
                    TickLabel(t), "</text>\n");
  }
  for (double t : Ticks(sy)) {
    const double py = sy(t);
    absl::StrAppend(&out, "<line x1=\"", SvgNumber(x0), "\" y1=\"", SvgNumber(py), "\" x2=\"",
                    SvgNumber(x1), "\" y2=\"", SvgNumber(py), "\" stroke=\"#e4e4e4\"/>\n<text x=\"",
                    SvgNumber(x0 - 6), "\" y=\"", SvgNumber(py + 4), "\" text-anchor=\"end\">",
                    TickLabel(t), "</text>\n");
  }
  absl::StrAppend(&out, "<rect x=\"", SvgNumber(x0), "\" y=\"", SvgNumber(y1), "\" width=\"",
                  SvgNumber(x1 - x0), "\" height=\"", SvgNumber(y0 - y1),
                  "\" fill=\"none\" stroke=\"#444\"/>\n");
  absl::StrAppend(&out, "<text x=\"", SvgNumber((x0 + x1) / 2), "\" y=\"", SvgNumber(y0 + 36),
                  "\" text-anchor=\"middle\" font-size=\"12\">", XmlEscape(plot.x.label),
                  "</text>\n");
  absl::StrAppend(&out, "<text transform=\"translate(18,", SvgNumber((y0 + y1) / 2),
                  ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">",
                  XmlEscape(plot.y.label), "</text>\n");
  for (double r : plot.x_refs) {
    if (!sx.Shows(r)) continue;
    absl::StrAppend(&out, "<line x1=\"", SvgNumber(sx(r)), "\" y1=\"", SvgNumber(y1), "\" x2=\"",
                    SvgNumber(sx(r)), "\" y2=\"", SvgNumber(y0),
                    "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/>\n");
  }
  for (double r : plot.y_refs) {
    if (!sy.Shows(r)) continue;
    absl::StrAppend(&out, "<line x1=\"", SvgNumber(x0), "\" y1=\"", SvgNumber(sy(r)), "\" x2=\"",
                    SvgNumber(x1), "\" y2=\"", SvgNumber(sy(r)),
                    "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/>\n");
  }

  // Series. Point labels are nudged down/up until they overlap no label placed before them.
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> placed;
  auto place_label = [&](double px, double py, size_t chars) -> std::pair<double, double> {
    const double w = kCharWidth * chars, h = 12;
    for (int k = 0; k < 12; ++k) {
      const double dy = (k % 2 == 0 ? 1 : -1) * 13.0 * ((k + 1) / 2);
      const Box b{px + 6, py - 5 + dy - h + 2, px + 6 + w, py - 5 + dy + 2};
      bool clash = false;
      for (const Box& o : placed) {
        clash |= b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1;
      }
      if (!clash || k == 11) {
        placed.push_back(b);
        return {px + 6, py - 5 + dy};
      }
    }
    return {px + 6, py - 5};
  };
  int palette = 0, legend_row = 0;
  for (const PlotSeries& s : plot.series) {
    const std::string colour =
        s.colour.empty() ? kPalette[palette++ % (sizeof(kPalette) / sizeof(kPalette[0]))]
                         : s.colour;
    const size_t n = std::min(s.x.size(), s.y.size());
    std::vector<std::pair<double, double>> pts;
    std::vector<size_t> index;
    for (size_t i = 0; i < n; ++i) {
      if (!sx.Shows(s.x[i]) || !sy.Shows(s.y[i])) continue;
      pts.emplace_back(sx(s.x[i]), sy(s.y[i]));
      index.push_back(i);
    }
    const bool line = s.style != PlotSeries::Style::kMarkers;
    const bool markers = s.style == PlotSeries::Style::kMarkers ||
                         s.style == PlotSeries::Style::kLineMarkers;
    if (line && pts.size() > 1) {
      std::string d;
      for (size_t i = 0; i < pts.size(); ++i) {
        if (i > 0 && s.style == PlotSeries::Style::kStep) {
          absl::StrAppend(&d, " L", SvgNumber(pts[i].first), ",", SvgNumber(pts[i - 1].second));
        }
        absl::StrAppend(&d, i == 0 ? "M" : " L", SvgNumber(pts[i].first), ",",
                        SvgNumber(pts[i].second));
      }
      absl::StrAppend(&out, "<path d=\"", d, "\" fill=\"none\" stroke=\"", colour,
                      "\" stroke-width=\"1.6\"", s.dashed ? " stroke-dasharray=\"6,3\"" : "",
                      "/>\n");
    }
    if (markers) {
      for (size_t k = 0; k < pts.size(); ++k) {
        absl::StrAppend(&out, "<circle cx=\"", SvgNumber(pts[k].first), "\" cy=\"",
                        SvgNumber(pts[k].second), "\" r=\"3.5\" fill=\"", colour, "\"/>\n");
        const size_t i = index[k];
        if (i < s.point_labels.size() && !s.point_labels[i].empty()) {
          const auto [tx, ty] = place_label(pts[k].first, pts[k].second, s.point_labels[i].size());
          absl::StrAppend(&out, "<text x=\"", SvgNumber(tx), "\" y=\"", SvgNumber(ty), "\" fill=\"",
                          colour, "\">", XmlEscape(s.point_labels[i]), "</text>\n");
        }
      }
    }
    if (!s.label.empty()) {
      const double ly = kTop + 8 + 16 * legend_row++;
      const double lx = x1 + 14;
      absl::StrAppend(&out, "<line x1=\"", SvgNumber(lx), "\" y1=\"", SvgNumber(ly), "\" x2=\"",
                      SvgNumber(lx + 20), "\" y2=\"", SvgNumber(ly), "\" stroke=\"", colour,
                      "\" stroke-width=\"2\"", s.dashed ? " stroke-dasharray=\"6,3\"" : "", "/>\n");
      if (markers) {
        absl::StrAppend(&out, "<circle cx=\"", SvgNumber(lx + 10), "\" cy=\"", SvgNumber(ly),
                        "\" r=\"3.5\" fill=\"", colour, "\"/>\n");
      }
      absl::StrAppend(&out, "<text x=\"", SvgNumber(lx + 26), "\" y=\"", SvgNumber(ly + 4), "\">",
                      XmlEscape(s.label), "</text>\n");
    }
  }
  for (size_t i = 0; i < plot.caption.size(); ++i) {
    absl::StrAppend(&out, "<text x=\"8\" y=\"", SvgNumber(h + 4 + kCaptionLine * (i + 1)),
                    "\" font-size=\"10\" fill=\"#555\">", XmlEscape(plot.caption[i]), "</text>\n");
  }
  out += "</svg>\n";
  return out;
}

namespace {

double Attribute(const std::string& svg, const std::string& name) {
  const size_t open = svg.find("<svg");
  if (open == std::string::npos) return 0;
  const size_t close = svg.find('>', open);
  const size_t at = svg.find(" " + name + "=\"", open);
  if (at == std::string::npos || at > close) return 0;
  return std::strtod(svg.c_str() + at + name.size() + 3, nullptr);
}

}  // namespace

double SvgWidth(const std::string& svg) { return Attribute(svg, "width"); }
double SvgHeight(const std::string& svg) { return Attribute(svg, "height"); }

std::string NestSvg(const std::string& inner, double x, double y) {
  size_t open = inner.find("<svg");
  if (open == std::string::npos) return "";
  std::string body = inner.substr(open);
  body.insert(4, absl::StrCat(" x=\"", SvgNumber(x), "\" y=\"", SvgNumber(y), "\""));
  return body;
}

}  // namespace pipetrain::schedule
