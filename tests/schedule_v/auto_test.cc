// The auto planner (auto_planner.h): it chooses the fastest fitting member of its family,
// explains the choice, generates the family on threads without changing the rows, and skips
// members that cannot be chosen without changing the choice.
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "schedule/auto_planner.h"
#include "schedule/generator.h"
#include "schedule/sim_result.h"
#include "schedule/simulator.h"
#include "tests/schedule/test_util.h"
#include "tests/schedule_v/run_gen.h"

namespace pipetrain::schedule {
namespace {

using testing::Measured;
using testing::RunGen;
using testing::Spec;

TEST(AutoTest, PicksFastestThatFitsAndExplains) {
  PipelineSpec spec = Spec(8, 32);
  spec.memory_limit = 5;
  const std::vector<PlanCandidate> rows = ExplainAuto(spec);
  const PlanCandidate* chosen = nullptr;
  for (const PlanCandidate& c : rows) {
    if (c.chosen) chosen = &c;
  }
  ASSERT_NE(chosen, nullptr) << FormatCandidates(rows);
  EXPECT_LE(chosen->peak, 5.0);
  for (const PlanCandidate& c : rows) {
    if (c.fits) {
      EXPECT_GE(c.makespan, chosen->makespan - 1e-9) << c.name;
    }
  }
  const Measured m = RunGen("auto", spec);
  EXPECT_DOUBLE_EQ(m.makespan, chosen->makespan);
  EXPECT_NE(FormatCandidates(rows).find("<- chosen"), std::string::npos);
}

// auto generates its family on threads (auto_planner.cc): its rows must be what generating and
// simulating each member one after the other gives, in the family's order.
TEST(AutoTest, ThreadedRowsMatchOneByOne) {
  PipelineSpec spec = Spec(4, 12, 1, 1.5, 0.5, 0.2);
  spec.memory_limit = 3;
  const std::vector<PlanCandidate> rows = ExplainAuto(spec);
  const std::vector<std::string> family = {
      "v-zb", "zb-v",  "dualpipev", "v-half",           "v-min",          "v-adaptive",
      "1f1b", "zb-h1", "zb-h2",     "interleaved-1f1b", "interleaved-zb", "gpipe"};
  ASSERT_EQ(rows.size(), family.size()) << FormatCandidates(rows);
  for (size_t i = 0; i < family.size(); ++i) {
    EXPECT_EQ(rows[i].name, family[i]);
    absl::StatusOr<Schedule> s = Generate(family[i], spec);
    EXPECT_EQ(rows[i].generated, s.ok()) << family[i];
    if (!s.ok()) continue;
    absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(rows[i].makespan, r->makespan) << family[i];
    EXPECT_EQ(rows[i].peak, MaxPeak(*r)) << family[i];
  }
}

// MakeAuto skips members whose ChoosableMakespanBound is above a fitting member's makespan
// (auto_planner.h): the bound must hold for every plan auto could choose (and for v-min's plans,
// within its own cap, always).
TEST(AutoTest, ChoosableMakespanBoundHolds) {
  int checked = 0;
  for (int p : {2, 3, 4, 8, 16}) {
    for (int m : {1, p, 2 * p + 1}) {
      for (auto [b, w, comm] : std::vector<std::tuple<double, double, double>>{
               {1, 1, 0}, {1.5, 0.5, 0.2}, {2, 1, 0.2}}) {
        for (double limit : {0.0, 1.0 + p / 2, static_cast<double>(p)}) {
          PipelineSpec spec = Spec(p, m, 1, b, w, comm);
          spec.memory_limit = limit;
          for (const char* name : {"v-min", "1f1b", "zb-h1", "zb-h2", "gpipe"}) {
            if (std::string(name) == "v-min" && p * m > 32) continue;  // (its polish is slow)
            const double bound = ChoosableMakespanBound(name, spec);
            absl::StatusOr<Schedule> s = Generate(name, spec);
            if (!s.ok() || bound <= 0) continue;
            absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
            ASSERT_TRUE(r.ok()) << r.status();
            const bool fits = limit <= 0 || MaxPeak(*r) <= limit + 1e-9;
            if (!fits && std::string(name) != "v-min") continue;
            EXPECT_GE(r->makespan, bound) << name << " p=" << p << " m=" << m << " b=" << b
                                          << " w=" << w << " comm=" << comm << " limit=" << limit;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 150);
}

// ... and its choice is ExplainAuto's (which generates every member), where members are skipped.
TEST(AutoTest, SkippingKeepsTheChoice) {
  for (auto [p, m, limit] :
       std::vector<std::tuple<int, int, double>>{{16, 128, 0}, {16, 128, 10}}) {
    PipelineSpec spec = Spec(p, m, 1, 1.5, 0.5, 0.2);
    spec.memory_limit = limit;
    const std::vector<PlanCandidate> rows = ExplainAuto(spec);
    const PlanCandidate* chosen = nullptr;
    int skippable = 0;
    for (const PlanCandidate& c : rows) {
      if (c.chosen) chosen = &c;
    }
    ASSERT_NE(chosen, nullptr) << FormatCandidates(rows);
    for (const PlanCandidate& c : rows) {
      skippable += ChoosableMakespanBound(c.name, spec) > chosen->makespan ? 1 : 0;
    }
    EXPECT_GT(skippable, 0) << "p=" << p << ": no member to skip, the case tests nothing";
    absl::StatusOr<Schedule> a = Generate("auto", spec);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->name, "auto:" + chosen->name);
    absl::StatusOr<Schedule> direct = Generate(chosen->name, spec);
    ASSERT_TRUE(direct.ok()) << direct.status();
    EXPECT_EQ(a->worker_actions, direct->worker_actions) << chosen->name;
  }
}

TEST(AutoTest, NothingFitsSaysWhy) {
  PipelineSpec spec = Spec(4, 8);
  spec.memory_limit = 0.75;
  absl::StatusOr<Schedule> s = Generate("auto", spec);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted) << s.status();
  EXPECT_NE(s.status().message().find("smallest achievable peak"), std::string::npos);
  EXPECT_NE(s.status().message().find("offload"), std::string::npos);
}

}  // namespace
}  // namespace pipetrain::schedule
