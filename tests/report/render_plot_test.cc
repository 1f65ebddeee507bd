// RenderPlot / NestSvg: structure of the SVG (what is drawn where), not pixels.
#include "schedule/render_plot.h"

#include <string>

#include "gtest/gtest.h"

namespace pipetrain::schedule {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RenderPlotTest, LinesMarkersLegendAndCaption) {
  Plot plot;
  plot.title = "a & b";
  plot.x.label = "x";
  plot.y.label = "y";
  PlotSeries s;
  s.label = "first <1>";
  s.x = {0, 1, 2};
  s.y = {0, 10, 5};
  s.point_labels = {"p0", "", "p2"};
  plot.series.push_back(s);
  plot.caption = {"date: today", "command: bench"};
  const std::string svg = RenderPlot(plot);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &amp; b"), std::string::npos);
  EXPECT_NE(svg.find("first &lt;1&gt;"), std::string::npos);
  EXPECT_EQ(Count(svg, "<circle"), 3 + 1);  // 3 points + the legend marker
  EXPECT_EQ(Count(svg, "<path"), 1);
  EXPECT_NE(svg.find(">p0<"), std::string::npos);
  EXPECT_NE(svg.find(">p2<"), std::string::npos);
  EXPECT_NE(svg.find("command: bench"), std::string::npos);
  // Height grows by the caption.
  EXPECT_GT(SvgHeight(svg), plot.height);
  EXPECT_EQ(SvgWidth(svg), plot.width);
}

TEST(RenderPlotTest, StepSeriesHoldsLevelUntilNextPoint) {
  Plot plot;
  plot.x.min = 0;
  plot.x.max = 10;
  plot.y.min = 0;
  plot.y.max = 10;
  plot.width = 100 + 78 + 24;  // plot area 100 px wide (no legend)
  plot.height = 40 + 56 + 100;  // and 100 px high
  PlotSeries s;
  s.style = PlotSeries::Style::kStep;
  s.x = {0, 5};
  s.y = {0, 10};
  plot.series.push_back(s);
  const std::string svg = RenderPlot(plot);
  // x: 78 + 10*v px; y: 140 - 10*v px. (0,0) -> (5,0) -> (5,10).
  EXPECT_NE(svg.find("d=\"M78.00,140.00 L128.00,140.00 L128.00,40.00\""), std::string::npos)
      << svg;
}

TEST(RenderPlotTest, LogAxisDropsNonPositiveAndTicksDecades) {
  Plot plot;
  plot.x.log = true;
  plot.y.log = true;
  PlotSeries s;
  s.style = PlotSeries::Style::kMarkers;
  s.x = {0, 1, 1000};
  s.y = {5, 0.01, 100};
  plot.series.push_back(s);
  const std::string svg = RenderPlot(plot);
  EXPECT_EQ(Count(svg, "<circle"), 2);  // x = 0 dropped
  for (const char* tick : {">1<", ">10<", ">100<", ">1000<", ">0.01<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  }
}

TEST(RenderPlotTest, ReferenceLinesAreDashed) {
  Plot plot;
  plot.x_refs = {1};
  plot.y_refs = {1};
  PlotSeries s;
  s.x = {0.5, 2};
  s.y = {0.5, 2};
  plot.series.push_back(s);
  EXPECT_EQ(Count(RenderPlot(plot), "stroke-dasharray=\"5,4\""), 2);
}

TEST(NestSvgTest, PositionsDocumentAndStripsProlog) {
  const std::string inner =
      "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" "
      "height=\"20\"><rect/></svg>\n";
  const std::string nested = NestSvg(inner, 3, 4.5);
  EXPECT_EQ(nested.rfind("<svg x=\"3.00\" y=\"4.50\" xmlns=", 0), 0u) << nested;
  EXPECT_EQ(SvgWidth(inner), 10);
  EXPECT_EQ(SvgHeight(inner), 20);
  EXPECT_EQ(NestSvg("no svg here", 0, 0), "");
}

}  // namespace
}  // namespace pipetrain::schedule
