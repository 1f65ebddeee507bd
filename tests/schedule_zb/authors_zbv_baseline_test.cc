// pipetrain's zb-v and v-zb against an independent baseline of the zero-bubble authors' ZB-V
// builder (authors_zbv_baseline.h): at the authors' own settings pipetrain must be at least as
// good, i.e. its per-stage bubble <= the baseline's + 1e-9 at a peak <= the baseline's.
#include "tests/schedule_zb/authors_zbv_baseline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"
#include "tests/schedule_v/authors_cost_ratios.h"

namespace pipetrain::schedule {
namespace {

using testing::AuthorsZbvPlan;
using testing::AuthorsZbvSchedule;

// The baseline's order, timed by pipetrain's own simulator: a valid V schedule whose span and
// peak are the baseline's own figures (so the two time the same way).
Schedule AsSchedule(const AuthorsZbvPlan& plan, int p, int m) {
  Schedule s = MakeEmptySchedule("authors-zb-v", p, m, VPlacement(p));
  s.worker_actions = plan.order;
  return s;
}

// The authors' figures at unit costs and no transfer cost (the published anchors: zero
// bubble from m = 2p on, a peak of p units), and the baseline's order simulates to its own span.
TEST(AuthorsZbvBaselineTest, ReproducesTheAuthorsFigures) {
  for (int p : {4, 8}) {
    for (int m : {2 * p, 4 * p}) {
      const AuthorsZbvPlan a = AuthorsZbvSchedule(p, m, 1, 1, 1, 0);
      ASSERT_TRUE(a.ok) << p << " " << m;
      EXPECT_NEAR(a.bubble, 0.0, 1e-12) << p << " " << m;
      EXPECT_DOUBLE_EQ(a.peak_units, p) << p << " " << m;
    }
  }
  for (double comm : {0.0, 0.1}) {
    const int p = 6, m = 9;
    const AuthorsZbvPlan a = AuthorsZbvSchedule(p, m, 0.5, 1, 0.5, comm);
    ASSERT_TRUE(a.ok);
    const Schedule s = AsSchedule(a, p, m);
    ASSERT_TRUE(ValidateSchedule(s).ok()) << ValidateSchedule(s);
    PipelineSpec spec;
    spec.num_workers = p;
    spec.num_microbatches = m;
    spec.f = 1, spec.b = 2, spec.w = 1, spec.comm = comm;
    absl::StatusOr<SimResult> r = Simulate(s, CostModelFor(spec, 2));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(LongestSpan(*r), a.max_span, 1e-9);
    EXPECT_NEAR(MaxPeak(*r), a.peak_units, 1e-9);
  }
}

class AuthorsZbvGridTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

// The grid of the other baselines, with m subsampled to keep the test within seconds (a V
// generator with its order polish takes up to ~0.1 s at p x m of a few thousand): m in {p, 64}
// for every p in 2..16, 24 and 32, also m = 2p for p <= 8, three cost ratios (a worker's share;
// a chunk costs half), each with no transfer cost and with 0.1. One CTest test per p and cost
// ratio.
TEST_P(AuthorsZbvGridTest, ZbVAndVZbNeverWorseThanTheAuthorsBuilder) {
  const int p = std::get<0>(GetParam());
  const testing::CostRatio c = testing::kAuthorsCostRatios[std::get<1>(GetParam())];
  std::map<std::string, std::vector<double>> ratios;
  std::map<std::string, int> better, count;
  for (int m : {p, 2 * p, 64}) {
    if (m > 64 || (m == 2 * p && p > 8) || (m == 64 && p == 64)) continue;
    for (double comm : {0.0, 0.1}) {
      const AuthorsZbvPlan authors = AuthorsZbvSchedule(p, m, c.f / 2, c.b / 2, c.w / 2, comm);
      ASSERT_TRUE(authors.ok) << p << " " << m;
      PipelineSpec spec;
      spec.num_workers = p;
      spec.num_microbatches = m;
      spec.f = c.f;
      spec.b = c.b;
      spec.w = c.w;
      spec.comm = comm;
      for (const char* name : {"zb-v", "v-zb"}) {
        absl::StatusOr<Schedule> s = Generate(name, spec);
        ASSERT_TRUE(s.ok()) << s.status();
        absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, 2));
        ASSERT_TRUE(r.ok()) << r.status();
        const double peak = MaxPeak(*r);
        const std::string cell =
            absl::StrFormat("%s p=%d m=%d %g:%g:%g comm %g", name, p, m, c.f, c.b, c.w, comm);
        EXPECT_LE(r->bubble_ratio, authors.bubble + 1e-9)
            << cell << ": span " << LongestSpan(*r) << " vs the authors' " << authors.max_span
            << " (peaks " << peak << ", " << authors.peak_units << ")";
        EXPECT_LE(peak, authors.peak_units + 1e-9) << cell;
        const std::string key = absl::StrFormat("%s comm %g", name, comm);
        if (authors.bubble > 1e-12) ratios[key].push_back(r->bubble_ratio / authors.bubble);
        better[key] += r->bubble_ratio < authors.bubble - 1e-9;
        ++count[key];
      }
    }
  }
  for (const auto& entry : count) {
    const std::vector<double>& list = ratios[entry.first];
    double sum = 0, best = 1;
    for (double x : list) sum += x, best = std::min(best, x);
    std::printf(
        "authors-zbv-grid p=%d %g:%g:%g %s: better %d of %d, mean ratio %.4f over %zu, best "
        "%.4f\n",
        p, c.f, c.b, c.w, entry.first.c_str(), better[entry.first], entry.second,
        list.empty() ? 1.0 : sum / list.size(), list.size(), best);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPAndCosts, AuthorsZbvGridTest,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                              13, 14, 15, 16, 24, 32),
                                            ::testing::Range(0, 3)));

}  // namespace
}  // namespace pipetrain::schedule
