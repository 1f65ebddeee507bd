// Runs the benchmark suite in quick mode into a temporary directory and checks what it wrote:
// every section, every schedule, the figures as SVG documents with data in them, the provenance
// (date, machine, command) beside the tables, and that hand-written text outside the generated
// block survives a rerun.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace {

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class BenchSuiteSmokeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pipetrain_bench_smoke_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  int RunSuite(const std::string& extra = "") {
    const std::string cmd = absl::StrCat(PIPETRAIN_BENCH_BIN, " --quick --out ", dir_.string(),
                                         " ", extra, " 2>", (dir_ / "stderr.txt").string());
    return std::system(cmd.c_str());
  }
  std::filesystem::path dir_;
};

TEST_F(BenchSuiteSmokeTest, QuickRunWritesTablesAndFigures) {
  // A hand-written section outside the generated block must survive.
  {
    std::ofstream seed(dir_ / "BENCHMARKS.md");
    seed << "# old title\n\nHand-written fact: 42 widgets.\n";
  }
  ASSERT_EQ(RunSuite("--sections gen,emulated,cpu,clip,frontier,offload,sampling"), 0)
      << Read(dir_ / "stderr.txt");
  const std::string md = Read(dir_ / "BENCHMARKS.md");
  for (const char* heading :
       {"## Schedule generation speed", "## Every schedule side by side: emulated backend",
        "## Every schedule side by side: real CPU compute, p = 2",
        "## Throughput-memory frontier", "## Offload",
        "## Gradient clipping with optimizer post-validation",
        "## Sampling speed: the KV cache"}) {
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
  }
  // Sampling: both runs' tokens/s and the check that they picked the same tokens.
  EXPECT_NE(md.find("| 1 | yes | 16 |"), std::string::npos) << md;
  EXPECT_NE(md.find("tokens of both runs are identical"), std::string::npos) << md;
  // Clipping on vs off for the two zero-bubble schedules: rows for each setting, and the
  // every-step setting clipped every step (3 = the warm-up and 2 measured steps).
  for (const char* name : {"v-zb", "zb-h1"}) {
    EXPECT_NE(md.find(absl::StrCat("| ", name, " | off | - | 0 of 3 | 0 / 0 |")),
              std::string::npos)
        << name << "\n" << md;
    EXPECT_NE(md.find(absl::StrCat("| ", name, " | on, every step clipped |")), std::string::npos)
        << name;
  }
  // Provenance beside every section: date, machine (cores, memory), load, command.
  EXPECT_GE(Count(md, "*Measured 20"), 5);
  EXPECT_GE(Count(md, "GiB memory"), 5);
  EXPECT_GE(Count(md, "load average"), 5);
  EXPECT_GE(Count(md, "Command: `"), 5);
  // Every registered schedule in the generation table, the three emulated sizes and the CPU
  // table (each schedule's row begins "| name |").
  for (const char* name : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v", "v-zb",
                           "v-half", "v-min", "v-adaptive", "auto"}) {
    EXPECT_GE(Count(md, absl::StrCat("| ", name, " |")), 5) << name;
  }
  for (const char* size : {"**p = 4, m = 4**", "**p = 8, m = 8**", "**p = 16, m = 16**"}) {
    EXPECT_NE(md.find(size), std::string::npos) << size;
  }
  // Every schedule ran, except dualpipev where the quick sizes have m < 2p (it refuses those).
  for (size_t at = md.find("not run:"); at != std::string::npos; at = md.find("not run:", at + 1)) {
    const std::string refusal = "not run: dualpipev needs num_microbatches";
    EXPECT_EQ(md.compare(at, refusal.size(), refusal), 0)
        << md.substr(at, 200);
  }
  EXPECT_EQ(md.find("**no**"), std::string::npos) << md;    // losses equal across schedules
  EXPECT_NE(md.find("Hand-written fact: 42 widgets."), std::string::npos);
  EXPECT_NE(md.find("# Earlier one-off measurements"), std::string::npos);

  // Offload: simulated memory vs p with and without offload, measured on the emulated backend.
  EXPECT_NE(md.find("| 8 | 1f1b | full |"), std::string::npos) << md;
  EXPECT_NE(md.find("1f1b + full offload"), std::string::npos) << md;  // on the frontier
  for (const char* fig : {"generation_speed.svg", "frontier.svg", "offload_memory.svg"}) {
    const std::string svg = Read(dir_ / "bench" / fig);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << fig;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << fig;
    EXPECT_NE(svg.find("command: "), std::string::npos) << fig;
    EXPECT_GE(Count(svg, "<circle"), 8) << fig;  // data points
    EXPECT_NE(md.find(absl::StrCat("](bench/", fig, ")")), std::string::npos) << fig;
  }
  // The frontier names the papers' schedules.
  const std::string frontier = Read(dir_ / "bench" / "frontier.svg");
  for (const char* name : {">v-half<", ">v-zb<", ">v-min<", ">zb-h1<", ">1f1b<"}) {
    EXPECT_NE(frontier.find(name), std::string::npos) << name;
  }

  // A rerun of one section replaces it, keeps the other sections of the block (in their order,
  // with their own provenance) and the hand-written rest, each exactly once.
  ASSERT_EQ(RunSuite("--sections offload"), 0) << Read(dir_ / "stderr.txt");
  const std::string again = Read(dir_ / "BENCHMARKS.md");
  EXPECT_EQ(Count(again, "Hand-written fact: 42 widgets."), 1);
  EXPECT_EQ(Count(again, "<!-- BEGIN GENERATED"), 1);
  EXPECT_EQ(Count(again, "## Schedule generation speed"), 1);
  EXPECT_EQ(Count(again, "## Offload"), 1);
  EXPECT_EQ(Count(again, "## Throughput-memory frontier"), 1);
  EXPECT_EQ(Count(again, "## Gradient clipping with optimizer post-validation"), 1);
  EXPECT_LT(again.find("## Schedule generation speed"), again.find("## Offload"));
  EXPECT_NE(again.find("the other sections (gen, emulated, frontier, cpu, clip, sampling) are kept"),
            std::string::npos)
      << again;
  const size_t gen = again.find("## Schedule generation speed");
  EXPECT_EQ(again.substr(gen, 2000), md.substr(md.find("## Schedule generation speed"), 2000));

}

TEST_F(BenchSuiteSmokeTest, RejectsUnknownSection) {
  EXPECT_NE(RunSuite("--sections gen,nope"), 0);
  EXPECT_NE(Read(dir_ / "stderr.txt").find("--sections: unknown section 'nope'"),
            std::string::npos);
}

}  // namespace
