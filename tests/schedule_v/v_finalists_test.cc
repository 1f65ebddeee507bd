// PlanBestV (schedule/v_finalists.h), the choice among the V candidates: a plan to beat
// (beat_span, the ZB-V wave in v-zb) leaves the winner as it is when the winner beats that plan,
// and leaves no candidate when none can; the winner fits the cap and is never longer than any
// fixed pattern that fits it.
#include "schedule/v_finalists.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "schedule/pipeline_spec.h"
#include "schedule/v_generators.h"
#include "schedule/v_greedy.h"
#include "schedule/v_modulo_block.h"
#include "schedule/v_pattern.h"

namespace pipetrain::schedule {
namespace {

struct Cell {
  int p, m;
  double b, w, comm;
};

CostModel CellCosts(const Cell& c) {
  PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = c.m;
  spec.f = 1;
  spec.b = c.b;
  spec.w = c.w;
  spec.comm = c.comm;
  return CostModelFor(spec, 2);
}

// A few greedy variants (rules x in-flight limits), as the generators build them.
std::vector<VVariant> GreedyCandidates() {
  std::vector<VVariant> out;
  for (bool older : {true, false}) {
    for (int k : {0, 3}) {
      VVariant v;
      v.label = absl::StrCat("greedy K=", k, older ? " b-older" : " b-down");
      v.options.b_older_first = older;
      v.inflight = k;
      out.push_back(v);
    }
  }
  return out;
}

// m > max(2p, 24): the screening, the predictions and the full-m stage all run.
const Cell kCells[] = {
    {4, 64, 1.5, 0.5, 0.2}, {8, 64, 1.5, 0.5, 0.2}, {8, 64, 2, 1, 0.1}, {6, 48, 1, 1, 0}};

TEST(VFinalistsTest, WinnerFitsTheCapAndIsNoWorseThanAFittingPattern) {
  const std::vector<VPatternKind> patterns = {VPatternKind::kHalf, VPatternKind::kMin};
  for (const Cell& c : kCells) {
    const CostModel costs = CellCosts(c);
    const double cap = VHalfPeakLaw(c.p);
    absl::StatusOr<VPlan> plan = PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(), "t");
    ASSERT_TRUE(plan.ok()) << c.p << " " << plan.status();
    EXPECT_LE(*std::max_element(plan->peak.begin(), plan->peak.end()), cap + 1e-9);
    for (VPatternKind kind : patterns) {
      const VOrderEval e = EvaluateVOrder(MakeVPattern(kind, c.p, c.m, "ref"), costs, cap);
      if (!e.ok || *std::max_element(e.peak.begin(), e.peak.end()) > cap + 1e-9) continue;
      EXPECT_LE(plan->max_span, e.max_span + 1e-9) << c.p << " " << VPatternLabel(kind);
    }
  }
}

TEST(VFinalistsTest, PlanToBeatKeepsAWinnerThatBeatsIt) {
  const std::vector<VPatternKind> patterns = {VPatternKind::kHalf, VPatternKind::kMin};
  for (const Cell& c : kCells) {
    const CostModel costs = CellCosts(c);
    const double cap = VHalfPeakLaw(c.p);
    absl::StatusOr<VPlan> plain =
        PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(), "t");
    ASSERT_TRUE(plain.ok()) << plain.status();
    // Just above the winner's span: the same plan, order and all.
    absl::StatusOr<VPlan> beaten =
        PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(), "t", plain->max_span + 0.5);
    ASSERT_TRUE(beaten.ok()) << c.p << " " << beaten.status();
    EXPECT_EQ(beaten->variant, plain->variant) << c.p;
    EXPECT_EQ(beaten->max_span, plain->max_span) << c.p;
    EXPECT_EQ(beaten->makespan, plain->makespan) << c.p;
    EXPECT_EQ(beaten->schedule.worker_actions, plain->schedule.worker_actions) << c.p;
    // Below it (by a tenth): no candidate is left.
    absl::StatusOr<VPlan> none =
        PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(), "t", 0.9 * plain->max_span);
    EXPECT_FALSE(none.ok()) << c.p << ": " << none->variant << " " << none->max_span;
  }
}

// The pattern a caller times for PlanBestV (VPatternToRun) is the one of a pattern pair that
// PlanBestV's own screening prefers, and the screening runs it hands on are those PlanBestV
// would take: with both handed over, the plan is the same as without them.
TEST(VFinalistsTest, ThePatternToTimeIsTheScreeningsChoiceAndChangesNoPlan) {
  const std::vector<VPatternKind> patterns = {VPatternKind::kHalf, VPatternKind::kMin,
                                              VPatternKind::kHalfReordered};
  int reordered_chosen = 0;
  for (const Cell& c : kCells) {
    const CostModel costs = CellCosts(c);
    const double cap = VHalfPeakLaw(c.p);
    std::vector<ScreenedPattern> screened_runs;
    const VPatternKind kind =
        VPatternToRun(VPatternKind::kHalf, patterns, c.p, c.m, costs, cap, "t", &screened_runs);
    auto screened = [&](VPatternKind k) {
      return EvaluateVOrder(MakeVPattern(k, c.p, VScreenMicrobatches(c.p), "t"), costs, cap)
          .max_span;
    };
    const double plain = screened(VPatternKind::kHalf);
    const double reordered = screened(VPatternKind::kHalfReordered);
    EXPECT_EQ(kind, reordered < plain - 1e-9 ? VPatternKind::kHalfReordered : VPatternKind::kHalf)
        << c.p << " " << plain << " " << reordered;
    reordered_chosen += kind == VPatternKind::kHalfReordered;
    ASSERT_EQ(screened_runs.size(), 2u);
    EXPECT_EQ(screened_runs[0].kind, VPatternKind::kHalf);
    EXPECT_EQ(screened_runs[0].span, plain);
    EXPECT_EQ(screened_runs[1].kind, VPatternKind::kHalfReordered);
    EXPECT_EQ(screened_runs[1].span, reordered);
    std::vector<ScreenedPattern> unused;
    // Without the partner, or where PlanBestV does not screen: the pattern asked for.
    EXPECT_EQ(VPatternToRun(VPatternKind::kHalf, {VPatternKind::kHalf, VPatternKind::kMin}, c.p,
                            c.m, costs, cap, "t", &unused),
              VPatternKind::kHalf);
    EXPECT_EQ(VPatternToRun(VPatternKind::kHalf, patterns, c.p, VScreenMicrobatches(c.p), costs,
                            cap, "t", &unused),
              VPatternKind::kHalf);
    EXPECT_TRUE(unused.empty());

    absl::StatusOr<VPlan> untimed =
        PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(), "t");
    ASSERT_TRUE(untimed.ok()) << untimed.status();
    Schedule s = MakeVPattern(kind, c.p, c.m, "t");
    const VOrderEval e = EvaluateVOrder(s, costs, cap);
    ASSERT_TRUE(e.ok);
    std::vector<TimedPattern> timed = {TimedPattern{
        kind, VPlan{std::move(s), e.max_span, e.makespan, e.peak, VPatternLabel(kind)}}};
    absl::StatusOr<VPlan> with = PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(), "t",
                                           1e300, nullptr, std::move(timed), screened_runs);
    ASSERT_TRUE(with.ok()) << with.status();
    EXPECT_EQ(with->variant, untimed->variant) << c.p;
    EXPECT_EQ(with->max_span, untimed->max_span) << c.p;
    EXPECT_EQ(with->makespan, untimed->makespan) << c.p;
    EXPECT_EQ(with->schedule.worker_actions, untimed->schedule.worker_actions) << c.p;
  }
  EXPECT_GT(reordered_chosen, 0) << "no cell where the reordered pattern screens faster";
}

// A timed pattern is a plan in hand: it competes at the end even where the screening preferred
// its partner, so a plan better than every candidate is never lost. (Its span is set below any
// candidate's here, to make it the best.)
TEST(VFinalistsTest, APlanInHandBetterThanEveryCandidateIsReturned) {
  const std::vector<VPatternKind> patterns = {VPatternKind::kHalf, VPatternKind::kHalfReordered};
  const Cell c = kCells[0];
  const CostModel costs = CellCosts(c);
  const double cap = VHalfPeakLaw(c.p);
  Schedule s = MakeVPattern(VPatternKind::kHalf, c.p, c.m, "t");
  const VOrderEval e = EvaluateVOrder(s, costs, cap);
  ASSERT_TRUE(e.ok);
  const double span = 0.5 * e.max_span;
  std::vector<TimedPattern> timed = {
      TimedPattern{VPatternKind::kHalf, VPlan{std::move(s), span, e.makespan, e.peak, "in hand"}}};
  absl::StatusOr<VPlan> plan = PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(), "t",
                                         1e300, nullptr, std::move(timed));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->variant, "in hand");
  EXPECT_EQ(plan->max_span, span);
}

// Candidates made by `later` (on a second thread while the others are screened) give the plan
// that the same candidates give when passed in `variants`: the same winner, to the action. The
// later ones are modulo-scheduled blocks, which win some of these cells; where PlanBestV does
// not screen (m <= the prefix) `later` runs first, on the caller's thread.
TEST(VFinalistsTest, CandidatesMadeLaterGiveThePlanOfCandidatesPassedIn) {
  const std::vector<VPatternKind> patterns = {VPatternKind::kHalf, VPatternKind::kMin};
  int later_won = 0;
  for (const Cell& base : kCells) {
    for (int m : {base.m, VScreenMicrobatches(base.p)}) {
      const Cell c{base.p, m, base.b, base.w, base.comm};
      const CostModel costs = CellCosts(c);
      const double cap = VHalfPeakLaw(c.p);
      std::vector<VVariant> blocks;
      ModuloBlockOptions options;  // the shortest period with blocks within the cap
      std::vector<BuildingBlock> found;
      for (options.extra_slots = 0; found.empty() && options.extra_slots < 40;
           ++options.extra_slots) {
        found = ModuloVBlocks(c.p, costs, cap, options);
      }
      for (BuildingBlock& b : found) {
        VVariant v;
        v.label = absl::StrCat("modulo block #", blocks.size());
        v.fixed_block = std::move(b);
        blocks.push_back(std::move(v));
      }
      ASSERT_FALSE(blocks.empty()) << c.p << " " << c.m;
      std::vector<VVariant> all = GreedyCandidates();
      all.insert(all.end(), blocks.begin(), blocks.end());
      absl::StatusOr<VPlan> passed = PlanBestV(c.p, c.m, costs, cap, patterns, all, "t");
      int calls = 0;
      absl::StatusOr<VPlan> made = PlanBestV(c.p, c.m, costs, cap, patterns, GreedyCandidates(),
                                             "t", 1e300, nullptr, {}, {}, [&] {
                                               ++calls;
                                               return blocks;
                                             });
      ASSERT_TRUE(passed.ok()) << passed.status();
      ASSERT_TRUE(made.ok()) << made.status();
      EXPECT_EQ(calls, 1);
      EXPECT_EQ(made->variant, passed->variant) << c.p << " " << c.m;
      EXPECT_EQ(made->max_span, passed->max_span) << c.p << " " << c.m;
      EXPECT_EQ(made->makespan, passed->makespan) << c.p << " " << c.m;
      EXPECT_EQ(made->schedule.worker_actions, passed->schedule.worker_actions) << c.p;
      later_won += made->variant.rfind("modulo block", 0) == 0;
    }
  }
  EXPECT_GT(later_won, 0) << "no cell where a later candidate wins";
}

// The greedy trend tests' cells: long enough for a steady state at 3/8 of the run.
const Cell kSteadyCells[] = {{8, 128, 1.5, 0.5, 0.2}, {6, 96, 2, 1, 0.1}};

VGreedyOptions VHalfCapped(const Cell& c) {
  VGreedyOptions options;
  options.memory_cap = VHalfPeakLaw(c.p);
  return options;
}

// The greedy engine's trend stop (VGreedyOptions::trend_abort_span): a run whose pace at 3/8 of
// its passes puts its span well past the limit stops (pruned, no plan); one whose pace stays
// under it is not touched (the same plan as without the limit). The pace is a good estimate on
// these steady-state runs: within 20% of the span the run reaches.
TEST(VFinalistsTest, TheGreedyTrendStopsOnlyARunWhosePacePassesTheLimit) {
  for (const Cell& c : kSteadyCells) {
    const CostModel costs = CellCosts(c);
    VGreedyOptions options = VHalfCapped(c);
    absl::StatusOr<VGreedyResult> plain = GreedyScheduleV(c.p, c.m, costs, options, "t");
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_FALSE(plain->pruned);
    options.trend_abort_span = 0.8 * plain->max_span;
    absl::StatusOr<VGreedyResult> stopped = GreedyScheduleV(c.p, c.m, costs, options, "t");
    ASSERT_TRUE(stopped.ok()) << stopped.status();
    EXPECT_TRUE(stopped->pruned) << c.p;
    EXPECT_TRUE(stopped->schedule.worker_actions.empty() ||
                stopped->schedule.worker_actions[0].size() <
                    plain->schedule.worker_actions[0].size());
    options.trend_abort_span = 1.2 * plain->max_span;
    absl::StatusOr<VGreedyResult> kept = GreedyScheduleV(c.p, c.m, costs, options, "t");
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_FALSE(kept->pruned) << c.p;
    EXPECT_EQ(kept->max_span, plain->max_span);
    EXPECT_EQ(kept->schedule.worker_actions, plain->schedule.worker_actions);
  }
}

// Bounds learned during a greedy run (VGreedyOptions::late_limits, taken at the trend moment)
// end the run exactly as the same bounds given from the start: pruned alike, else the same plan
// to the action. Among the cases: runs that the bound from the start stops before the trend
// moment, runs that only the trend stops, and runs that end.
TEST(VFinalistsTest, LateLimitsEndTheRunAsTheSameLimitsFromTheStart) {
  int stopped_early = 0, stopped_by_trend = 0, kept = 0;
  for (const Cell& c : kSteadyCells) {
    const CostModel costs = CellCosts(c);
    const VGreedyOptions options = VHalfCapped(c);
    absl::StatusOr<VGreedyResult> plain = GreedyScheduleV(c.p, c.m, costs, options, "t");
    ASSERT_TRUE(plain.ok()) << plain.status();
    const double span = plain->max_span;
    const size_t moment = 6 * static_cast<size_t>(c.p) * c.m * 3 / 8;
    for (double abort : {0.6, 0.8, 0.9, 0.99, 1.0, 1.05, 1e300}) {
      for (double trend : {0.8, 1.2, 1e300}) {
        VGreedyOptions given = options;
        given.abort_span = abort * span;
        given.trend_abort_span = trend * span;
        absl::StatusOr<VGreedyResult> start = GreedyScheduleV(c.p, c.m, costs, given, "t");
        VGreedyOptions late = options;
        int calls = 0;
        late.late_limits = [&](double* abort_span, double* trend_span) {
          ++calls;
          *abort_span = abort * span;
          *trend_span = trend * span;
          return true;
        };
        absl::StatusOr<VGreedyResult> learned = GreedyScheduleV(c.p, c.m, costs, late, "t");
        ASSERT_TRUE(start.ok()) << start.status();
        ASSERT_TRUE(learned.ok()) << learned.status();
        EXPECT_EQ(calls, 1);
        EXPECT_EQ(learned->pruned, start->pruned) << c.p << " " << abort << " " << trend;
        if (start->pruned) {
          size_t done = 0;
          for (const auto& list : start->schedule.worker_actions) done += list.size();
          stopped_early += done < moment;
          stopped_by_trend += abort > 1.1 && trend < 1.0;
          continue;
        }
        ++kept;
        EXPECT_EQ(learned->max_span, span);
        EXPECT_EQ(learned->makespan, start->makespan);
        EXPECT_EQ(learned->peak, start->peak);
        EXPECT_EQ(learned->schedule.worker_actions, plain->schedule.worker_actions);
      }
    }
    // A caller that gives up at the moment stops the run there.
    VGreedyOptions give_up = options;
    give_up.late_limits = [](double*, double*) { return false; };
    absl::StatusOr<VGreedyResult> stopped = GreedyScheduleV(c.p, c.m, costs, give_up, "t");
    ASSERT_TRUE(stopped.ok()) << stopped.status();
    EXPECT_TRUE(stopped->pruned);
  }
  EXPECT_GT(stopped_early, 0);
  EXPECT_GT(stopped_by_trend, 0);
  EXPECT_GT(kept, 0);
}

}  // namespace
}  // namespace pipetrain::schedule
