// Golden plans: every generator's output over a grid of (p, m, costs), plus the transfer and
// offload passes, reduced to one line per plan (a hash of its text form, its makespan and peaks).
// A refactor that claims to move code without changing behaviour must leave this file as it is;
// a generator change that improves plans rewrites it on purpose:
//   PIPETRAIN_UPDATE_GOLDEN=1 <build>/tests/schedule/schedule_test --gtest_filter='*GoldenPlans*'
// then review the diff (which plans changed, and whether their makespans fell) before committing.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/offload_pass.h"
#include "schedule/passes.h"
#include "schedule/schedule_io.h"
#include "schedule/simulator.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// One line: the plan's identity and what it predicts under the costs it was planned with.
std::string Describe(const std::string& key, const absl::StatusOr<Schedule>& plan,
                     const CostModel& costs) {
  if (!plan.ok()) return absl::StrFormat("%s error %d", key, static_cast<int>(plan.status().code()));
  absl::StatusOr<SimResult> sim = Simulate(*plan, costs);
  if (!sim.ok()) return absl::StrFormat("%s simerror %d", key, static_cast<int>(sim.status().code()));
  std::vector<std::string> peaks;
  for (double x : sim->peak_memory) peaks.push_back(absl::StrFormat("%.6g", x));
  return absl::StrFormat("%s %s %016x span %.6f peaks %s", key, plan->name,
                         Fnv1a(ScheduleToText(*plan)), sim->makespan, absl::StrJoin(peaks, ","));
}

struct Costs {
  double f, b, w, comm;
};

std::vector<std::string> GoldenLines(const GeneratorInfo& g) {
  std::vector<std::string> lines;
  const std::vector<Costs> costs = {{1, 1, 1, 0}, {1, 1.5, 0.5, 0.2}, {1, 2, 1, 0.1}};
  {
    for (int p : {2, 3, 4, 6, 8}) {
      // auto runs every other generator several times; its own cells stop at p = 4 (time).
      if (g.name == "auto" && p > 4) continue;
      for (int m : {1, 3, 8, 16, 24}) {
        for (const Costs& c : costs) {
          PipelineSpec spec = testing::Spec(p, m, c.f, c.b, c.w, c.comm);
          // Generators that need a limit get V-Half's; auto also weighs offload plans.
          if (g.name == "v-adaptive" || g.name == "auto") spec.memory_limit = (p + 2) / 2;
          if (g.name == "auto") spec.offload_ratio = 0.5;
          const std::string key =
              absl::StrFormat("%s p%d m%d %g:%g:%g:%g", g.name, p, m, c.f, c.b, c.w, c.comm);
          absl::StatusOr<Schedule> plan = Generate(g.name, spec);
          const int v = plan.ok() ? plan->ChunksPerWorker() : 1;
          const CostModel model = CostModelFor(spec, v);
          lines.push_back(Describe(key, plan, model));
          if (!plan.ok() || p != 4 || m != 8) continue;
          // The passes on one cell of each generator: transfers, and each offload mode.
          lines.push_back(Describe(key + " +transfers", AddTransfers(*plan), model));
          PipelineSpec link = spec;
          link.offload_ratio = 0.5;
          const CostModel link_costs = CostModelFor(link, v);
          for (OffloadMode mode :
               {OffloadMode::kHalf, OffloadMode::kFull, OffloadMode::kSelective}) {
            OffloadOptions options;
            options.mode = mode;
            options.memory_limit = mode == OffloadMode::kSelective ? (p + 2) / 2.0 : 0;
            absl::StatusOr<OffloadPlan> offloaded = AddOffload(*plan, link_costs, options);
            absl::StatusOr<Schedule> schedule =
                offloaded.ok() ? absl::StatusOr<Schedule>(offloaded->schedule)
                               : absl::StatusOr<Schedule>(offloaded.status());
            lines.push_back(Describe(key + " +offload-" + OffloadModeName(mode), schedule,
                                     link_costs));
          }
        }
      }
    }
  }
  return lines;
}

class GoldenPlansTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenPlansTest, PlansAndPassesUnchanged) {
  const GeneratorInfo* generator = nullptr;
  for (const GeneratorInfo& g : Generators()) {
    if (g.name == GetParam()) generator = &g;
  }
  ASSERT_NE(generator, nullptr);
  const std::string path = std::string(PIPETRAIN_GOLDEN_DIR) + "/plans/" + GetParam() + ".txt";
  const std::vector<std::string> lines = GoldenLines(*generator);
  const std::string actual = absl::StrJoin(lines, "\n") + "\n";
  if (std::getenv("PIPETRAIN_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file " << path << " (PIPETRAIN_UPDATE_GOLDEN=1 writes it)";
  std::stringstream expected;
  expected << in.rdbuf();
  std::vector<std::string> want;
  for (std::string line; std::getline(expected, line);) want.push_back(line);
  ASSERT_EQ(want.size(), lines.size()) << "the grid itself changed; regenerate and review";
  int differing = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != want[i] && ++differing <= 10) {
      ADD_FAILURE() << "plan changed:\n  was " << want[i] << "\n  now " << lines[i];
    }
  }
  EXPECT_EQ(differing, 0) << differing << " of " << lines.size() << " plans changed";
}

// One test per generator, so CTest runs them side by side and a failure names the generator.
INSTANTIATE_TEST_SUITE_P(EveryGenerator, GoldenPlansTest, ::testing::ValuesIn(GeneratorNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace pipetrain::schedule
