// Renderers: golden files (byte-for-byte) and structural checks of SVG, trace and JSON.
// Regenerate the golden files with PIPETRAIN_UPDATE_GOLDEN=1 (see CMakeLists.txt).
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/generator.h"
#include "schedule/plan_json.h"
#include "schedule/render_ascii.h"
#include "schedule/render_svg.h"
#include "schedule/render_trace.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {
namespace {

struct Plan {
  Schedule s;
  SimResult r;
  CostModel c;
};

Plan Make(const char* name, int p, int m, int v = 0) {
  PipelineSpec spec;
  spec.num_workers = p;
  spec.num_microbatches = m;
  spec.chunks_per_worker = v;
  auto s = Generate(name, spec);
  EXPECT_TRUE(s.ok()) << s.status();
  CostModel c = CostModelFor(spec, s->ChunksPerWorker());
  auto r = Simulate(*s, c);
  EXPECT_TRUE(r.ok());
  return {*s, *r, c};
}

void CompareGolden(const std::string& file, const std::string& actual) {
  const std::string path = std::string(PIPETRAIN_GOLDEN_DIR) + "/" + file;
  if (std::getenv("PIPETRAIN_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << actual;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing golden file " << path << " (PIPETRAIN_UPDATE_GOLDEN=1 writes it)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "golden mismatch: " << path;
}

TEST(GoldenTest, Ascii1F1BP4M8) {
  Plan p = Make("1f1b", 4, 8);
  CompareGolden("1f1b_p4_m8.txt", RenderAscii(p.s, p.r) + RenderSummary(p.s, p.r));
}

TEST(GoldenTest, Svg1F1BP4M8) {
  Plan p = Make("1f1b", 4, 8);
  CompareGolden("1f1b_p4_m8.svg", RenderSvg(p.s, p.r));
}

TEST(GoldenTest, SvgZbH1P4M8) {
  Plan p = Make("zb-h1", 4, 8);
  CompareGolden("zb-h1_p4_m8.svg", RenderSvg(p.s, p.r));
}

TEST(GoldenTest, AsciiZbH1P4M8) {
  Plan p = Make("zb-h1", 4, 8);
  CompareGolden("zb-h1_p4_m8.txt", RenderAscii(p.s, p.r) + RenderSummary(p.s, p.r));
}

TEST(RenderTest, SvgShadesLaterChunksAndHasAxisAndLegend) {
  Plan p = Make("interleaved-1f1b", 2, 4, 2);
  const std::string svg = RenderSvg(p.s, p.r);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("#3e6fc2"), std::string::npos);  // F, chunk 0
  EXPECT_NE(svg.find("#a9c4eb"), std::string::npos);  // F, chunk 1
  EXPECT_NE(svg.find(">time</text>"), std::string::npos);
  EXPECT_NE(svg.find("dark: chunk 0"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(RenderTest, AsciiLowerCasesLaterChunks) {
  Plan p = Make("interleaved-1f1b", 2, 2, 2);
  const std::string grid = RenderAscii(p.s, p.r);
  EXPECT_NE(grid.find("F0"), std::string::npos);
  EXPECT_NE(grid.find("f0"), std::string::npos);
}

TEST(RenderTest, ChromeTraceHasOneTrackPerWorkerAndEveryAction) {
  Plan p = Make("zb-h1", 3, 4);
  auto doc = nlohmann::json::parse(RenderChromeTrace(p.s, p.r));
  int x = 0, names = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") ++x;
    if (e["name"] == "thread_name") ++names;
  }
  EXPECT_EQ(names, 3);
  EXPECT_EQ(x, static_cast<int>(p.r.timeline.size()));
  EXPECT_EQ(x, 3 * 4 * 3);
}

TEST(RenderTest, PlanJsonHasPlainFieldNames) {
  Plan p = Make("1f1b", 4, 8);
  auto doc = nlohmann::json::parse(PlanToJson(p.s, p.r, p.c));
  EXPECT_EQ(doc["schedule"], "1f1b");
  EXPECT_EQ(doc["workers"], 4);
  EXPECT_DOUBLE_EQ(doc["predictions"]["bubble_ratio"].get<double>(), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(doc["predictions"]["makespan"].get<double>(), 33.0);
  EXPECT_EQ(doc["predictions"]["peak_activation_units"][0], 4.0);
  EXPECT_EQ(doc["actions"][3][0], "3F0");
  EXPECT_FALSE(doc["predictions"].contains("peak_activation_bytes"));
}

}  // namespace
}  // namespace pipetrain::schedule
