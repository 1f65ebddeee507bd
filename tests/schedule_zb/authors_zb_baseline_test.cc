// pipetrain's zb-h1 against an independent baseline of the zero-bubble authors' ZB-H1 builder
// (authors_zbh1_baseline.h): at the authors' own settings pipetrain must be at least as good,
// i.e. its per-stage bubble <= the baseline's + 1e-9 at a peak <= the baseline's.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "tests/schedule_v/authors_cost_ratios.h"
#include "tests/schedule_zb/authors_zbh1_baseline.h"

namespace pipetrain::schedule {
namespace {

using testing::AuthorsZbH1Schedule;
using testing::AuthorsZbPlan;

// At comm 0 and m >= p: the paper's law (p-1)(F+B-W) / (m(F+B+W) + (p-1)(F+B-W)).
// Not reproduced: the issue's figure for the authors' builder at p = 16, m = 16, F = B = W = 1,
// transfer 0.1, bubble 0.2727 (span 66). This reading gives span 68.8 (0.3023, pipetrain's
// figure before its timed warm-up; see ZbH1ReachesTheIssuesFigure): after 1F1B's warm-up (p-1-j extra F's on stage j, forced by the strictly
// decreasing warm-up depth at a cap of p) each stage alternates B and F, so the backward wave
// moves one stage per F + B + 2 transfers, 2.2 here, and stage 0's 16 B's end at 34 + 16 x 2.2
// - 0.4 + 1 = 68.8. Span 66 needs the wave at 2.0 per microbatch, i.e. deeper warm-ups than
// the procedure as written allows; what the authors' code does differently is unknown here.
TEST(AuthorsZbH1BaselineTest, ReproducesTheAuthorsFigures) {
  const AuthorsZbPlan a = AuthorsZbH1Schedule(16, 16, 1, 1, 1, 0.1);
  EXPECT_DOUBLE_EQ(a.max_span, 68.8);
  EXPECT_DOUBLE_EQ(a.peak_units, 16);
  for (int p : {4, 8}) {
    for (int m : {p, 2 * p, 4 * p}) {
      const AuthorsZbPlan z = AuthorsZbH1Schedule(p, m, 1, 1, 1, 0);
      EXPECT_NEAR(z.bubble, (p - 1.0) / (3.0 * m + p - 1), 1e-12) << p << " " << m;
    }
  }
}

// The issue's figure for the authors' builder, p = 16, m = 16, F = B = W = 1, transfer 0.1:
// bubble 0.2727 (span 66). pipetrain's zb-h1 reaches it with the warm-up depth timing asks for
// (gen_zb.cc): every worker's backwards then follow the backward wave with no wait, one F or W
// between two B's, and worker 0's last W ends at 15 x 1.1 (forwards down) + 2 (F and B on the
// last worker) + 15 x 1.1 (backwards up) + 30 (15 more B's, 2 apart) + 1 (the last W) = 66.
// The 1F1B warm-up (p-1-w forwards) gave 68.8. No more memory: the peak stays at p.
TEST(AuthorsZbH1BaselineTest, ZbH1ReachesTheIssuesFigure) {
  PipelineSpec spec;
  spec.num_workers = 16;
  spec.num_microbatches = 16;
  spec.f = spec.b = spec.w = 1;
  spec.comm = 0.1;
  absl::StatusOr<Schedule> s = Generate("zb-h1", spec);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan, 66.0, 1e-9);
  EXPECT_NEAR(r->bubble_ratio, 1 - 48.0 / 66.0, 1e-9);  // 0.2727
  EXPECT_LE(MaxPeak(*r), 16 + 1e-9);
  const AuthorsZbPlan authors = AuthorsZbH1Schedule(16, 16, 1, 1, 1, 0.1);
  EXPECT_LT(r->bubble_ratio, authors.bubble - 1e-3) << "this file's reading of the builder";
}

// The V baseline's grid (authors_v_baseline_test.cc): m in {p, p+1, 2p, 64} for every p in
// 2..16, 24 and 32, three cost ratios, each with no transfer cost and with 0.1. One CTest test
// per p and cost ratio.

class AuthorsZbGridTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(AuthorsZbGridTest, ZbH1NeverWorseThanTheAuthorsBuilder) {
  const int p = std::get<0>(GetParam());
  const testing::CostRatio c = testing::kAuthorsCostRatios[std::get<1>(GetParam())];
  std::map<std::string, std::vector<double>> ratios;
  std::map<std::string, int> better, count;
  for (int m : {p, p + 1, 2 * p, 64}) {
    if (m > 64 || (m == 64 && 2 * p == 64)) continue;
    for (double comm : {0.0, 0.1}) {
      PipelineSpec spec;
      spec.num_workers = p;
      spec.num_microbatches = m;
      spec.f = c.f;
      spec.b = c.b;
      spec.w = c.w;
      spec.comm = comm;
      const AuthorsZbPlan authors = AuthorsZbH1Schedule(p, m, c.f, c.b, c.w, comm);
      absl::StatusOr<Schedule> s = Generate("zb-h1", spec);
      ASSERT_TRUE(s.ok()) << s.status();
      absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, 1));
      ASSERT_TRUE(r.ok()) << r.status();
      const double peak = MaxPeak(*r);
      const std::string cell =
          absl::StrFormat("zb-h1 p=%d m=%d %g:%g:%g comm %g", p, m, c.f, c.b, c.w, comm);
      EXPECT_LE(r->bubble_ratio, authors.bubble + 1e-9)
          << cell << ": span " << LongestSpan(*r) << " vs the authors' " << authors.max_span;
      EXPECT_LE(peak, authors.peak_units + 1e-9) << cell;
      const std::string key = absl::StrFormat("zb-h1 comm %g", comm);
      if (authors.bubble > 1e-12) ratios[key].push_back(r->bubble_ratio / authors.bubble);
      better[key] += r->bubble_ratio < authors.bubble - 1e-9;
      ++count[key];
    }
  }
  for (const auto& entry : ratios) {
    double sum = 0, best = 1e300;
    for (double x : entry.second) sum += x, best = std::min(best, x);
    std::printf("authors-zb-grid p=%d %g:%g:%g %s: better %d of %d, mean ratio %.4f, best %.4f\n",
                p, c.f, c.b, c.w, entry.first.c_str(), better[entry.first], count[entry.first],
                sum / entry.second.size(), best);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPAndCosts, AuthorsZbGridTest,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                              13, 14, 15, 16, 24, 32),
                                            ::testing::Range(0, 3)));

}  // namespace
}  // namespace pipetrain::schedule
