// CyclicOrder (schedule/cyclic_order.h): the period and peaks computed from a cyclic
// order agree with Simulate on the unrolled schedule; unrolled orders are valid for any m; the
// search finds a two-microbatch steady state faster than one repeated block (and than 1F1B's)
// where transfer costs make the chain long, and leaves compute-bound steady states alone.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "schedule/building_block.h"
#include "schedule/cyclic_order.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "schedule/v_modulo_block.h"
#include "schedule/validator.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

using testing::FromRows;
using testing::Spec;

SimResult Sim(const Schedule& s, const CostModel& costs) {
  const absl::StatusOr<SimResult> r = Simulate(s, costs);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

// V-Half's plan at 1:1.5:0.5, comm 0.2, p=4 from ONE repeated modulo block (the shortest the
// block search finds under the cap of 3 units: 3.4 per microbatch).
Schedule OneBlockPlan(const CostModel& costs, int m) {
  for (int extra = 0; extra <= 16; ++extra) {
    ModuloBlockOptions options;
    options.extra_slots = extra;
    const std::vector<BuildingBlock> found = ModuloVBlocks(4, costs, 3.0, options);
    if (!found.empty()) return RepeatBlock(found.front(), m, "one-block");
  }
  ADD_FAILURE() << "no block";
  return Schedule{};
}

// The steady state's period and every worker's peak, as the cyclic order predicts them, are
// what Simulate measures on the unrolled schedule: the span grows by the period per K
// microbatches once the ramp is over, and the peaks are reached.
TEST(CyclicOrderTest, PeriodAndPeaksMatchSimulate) {
  int checked = 0;
  for (const char* name : {"v-half", "v-min"}) {
    for (int p : {3, 4, 6}) {
      for (auto [b, w, comm] : {std::tuple{1.0, 1.0, 0.0}, std::tuple{2.0, 1.0, 0.2},
                                std::tuple{1.5, 0.5, 0.2}}) {
        const PipelineSpec spec = Spec(p, 48, 1, b, w, comm);
        const CostModel costs = CostModelFor(spec, 2);
        const absl::StatusOr<Schedule> plan = Generate(name, spec);
        ASSERT_TRUE(plan.ok()) << plan.status();
        for (int k : {1, 2}) {
          const std::optional<CyclicOrder> order = SteadyWindow(*plan, k);
          if (!order) continue;
          const std::string where = std::string(name) + " p=" + std::to_string(p) + " 1:" +
                                    std::to_string(b) + " comm " + std::to_string(comm) +
                                    " K=" + std::to_string(k);
          const double period = CyclicPeriod(*order, *plan, costs);
          ASSERT_LT(period, 1e300) << where;
          const SimResult shorter = Sim(Unroll(*order, *plan, 60 * k), costs);
          const SimResult longer = Sim(Unroll(*order, *plan, 84 * k), costs);
          // 24 periods apart; the bisection's tolerance is 1e-7 of the period.
          EXPECT_NEAR((LongestSpan(longer) - LongestSpan(shorter)) / 24, period, 1e-5 * period)
              << where;
          const std::vector<double> peaks = CyclicPeaks(*order, *plan, costs);
          ASSERT_EQ(peaks.size(), longer.peak_memory.size());
          for (size_t i = 0; i < peaks.size(); ++i) {
            EXPECT_DOUBLE_EQ(peaks[i], longer.peak_memory[i]) << where << " worker " << i;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 18);
}

// Unrolled for any number of microbatches (1 included), an order is a complete, valid schedule
// whose peaks never exceed the steady state's.
TEST(CyclicOrderTest, UnrolledIsValidForAnyLength) {
  const PipelineSpec spec = Spec(4, 32, 1, 1.5, 0.5, 0.2);
  const CostModel costs = CostModelFor(spec, 2);
  const Schedule plan = OneBlockPlan(costs, 32);
  for (int k : {1, 2, 3}) {
    const std::optional<CyclicOrder> order = SteadyWindow(plan, k);
    ASSERT_TRUE(order.has_value()) << "K=" << k;
    const std::vector<double> peaks = CyclicPeaks(*order, plan, costs);
    for (int m = 1; m <= 9; ++m) {
      const Schedule s = Unroll(*order, plan, m);
      EXPECT_TRUE(ValidateSchedule(s).ok()) << "K=" << k << " m=" << m << ": "
                                            << ValidateSchedule(s);
      const SimResult r = Sim(s, costs);
      for (size_t i = 0; i < peaks.size(); ++i) EXPECT_LE(r.peak_memory[i], peaks[i] + 1e-9);
    }
  }
}

// A window that repeats a pass (no steady state of K microbatches there), or lists too short
// for one, give no order.
TEST(CyclicOrderTest, SteadyWindowNeedsEachPassOnce) {
  // p=2 V placement: worker 0 holds stages 0 and 3, worker 1 stages 1 and 2.
  const Schedule ok = FromRows(2, {0, 1, 1, 0},
                               {"0F0 3F0 3I0 3W0 0I0 0W0 0F1 3F1 3I1 3W1 0I1 0W1",
                                "1F0 2F0 2I0 2W0 1I0 1W0 1F1 2F1 2I1 2W1 1I1 1W1"});
  ASSERT_TRUE(ValidateSchedule(ok).ok());
  EXPECT_TRUE(SteadyWindow(ok, 1).has_value());
  EXPECT_TRUE(SteadyWindow(ok, 2).has_value());
  EXPECT_FALSE(SteadyWindow(ok, 3).has_value());  // 18 passes per worker needed, 12 there
  // Worker 0's middle window of 6 holds 0F1 but no 0F of slot 0 (K=1: microbatch 1 twice over).
  const Schedule skewed = FromRows(2, {0, 1, 1, 0},
                                   {"0F0 0F1 3F0 3I0 3W0 3F1 3I1 0I0 3W1 0I1 0W0 0W1",
                                    "1F0 2F0 2I0 2W0 1I0 1W0 1F1 2F1 2I1 2W1 1I1 1W1"});
  ASSERT_TRUE(ValidateSchedule(skewed).ok());
  EXPECT_TRUE(SteadyWindow(skewed, 2).has_value());
  EXPECT_FALSE(SteadyWindow(skewed, 1).has_value());
}

// p=4, 1:1.5:0.5, comm 0.2, V-Half's cap of 3 units: one repeated block needs 3.4 per microbatch
// and 1F1B's steady state 3 + 2 * 0.2 * 3/4 = 3.3; two microbatches per period do better. The
// search is deterministic and its order, unrolled, fits the cap and beats 1F1B at m=64.
TEST(CyclicOrderTest, TwoMicrobatchesBeatOneBlockAnd1F1B) {
  const PipelineSpec spec = Spec(4, 64, 1, 1.5, 0.5, 0.2);
  const CostModel costs = CostModelFor(spec, 2);
  const Schedule plan = OneBlockPlan(costs, 64);
  const std::optional<CyclicOrder> start = SteadyWindow(plan, 2);
  ASSERT_TRUE(start.has_value());
  CyclicSearchOptions options;
  options.memory_cap = 3.0;
  const CyclicSearchResult found = ShortenPeriod(*start, plan, costs, options);
  EXPECT_NEAR(found.start_period, 2 * 3.4, 1e-6);
  EXPECT_LT(found.period / 2, 3.3 - 1e-6);
  EXPECT_NEAR(CyclicPeriod(found.order, plan, costs), found.period, 1e-6);
  for (double peak : CyclicPeaks(found.order, plan, costs)) EXPECT_LE(peak, 3.0 + 1e-9);
  EXPECT_LE(found.work, options.work_budget + 4 * 3 * 8 * 2 * 49);  // one test past it

  const CyclicSearchResult again = ShortenPeriod(*start, plan, costs, options);
  EXPECT_EQ(again.period, found.period);
  EXPECT_EQ(Unroll(again.order, plan, 64).worker_actions,
            Unroll(found.order, plan, 64).worker_actions);

  const Schedule unrolled = Unroll(found.order, plan, 64);
  ASSERT_TRUE(ValidateSchedule(unrolled).ok());
  const SimResult v = Sim(unrolled, costs);
  EXPECT_LE(MaxPeak(v), 3.0 + 1e-9);
  const absl::StatusOr<Schedule> one_f_one_b = Generate("1f1b", spec);
  ASSERT_TRUE(one_f_one_b.ok());
  const SimResult o = Sim(*one_f_one_b, CostModelFor(spec, 1));
  EXPECT_LT(LongestSpan(v), LongestSpan(o));
  EXPECT_LT(LongestSpan(v), LongestSpan(Sim(plan, costs)));
}

// "F7.0@-1": F of stage 7, microbatch 0 of the block, lap -1.
CyclicOrder ParseOrder(int k, const std::vector<std::string>& rows) {
  CyclicOrder order;
  order.microbatches = k;
  for (const std::string& row : rows) {
    std::vector<CyclicPass> list;
    for (absl::string_view tok : absl::StrSplit(row, ' ', absl::SkipEmpty())) {
      CyclicPass pass;
      pass.kind = tok[0] == 'F' ? ActionKind::kF : tok[0] == 'B' ? ActionKind::kB : ActionKind::kW;
      const std::vector<absl::string_view> parts = absl::StrSplit(tok.substr(1), absl::ByAnyChar(".@"));
      EXPECT_EQ(parts.size(), 3u) << tok;
      EXPECT_TRUE(absl::SimpleAtoi(parts[0], &pass.stage) && absl::SimpleAtoi(parts[1], &pass.slot) &&
                  absl::SimpleAtoi(parts[2], &pass.lap))
          << tok;
      list.push_back(pass);
    }
    order.workers.push_back(std::move(list));
  }
  return order;
}

// An order from an independent model (CP-SAT, bench/schedule_v/modulo_period_cpsat.py --p 4
// --costs 10,15,5 --comm 4 --cap-chunks 6 --microbatches 2 --period 132 --print-order: in
// 0.05-units, a period of 6.6 with at most 6 chunk activations per worker): here it runs at
// that period or faster (ASAP may tighten it), within 3 units, and unrolls to valid schedules.
TEST(CyclicOrderTest, AgreesWithAnIndependentModel) {
  const CyclicOrder order = ParseOrder(
      2, {"F0.0@0 F7.0@-1 B7.0@-1 W7.0@-1 B0.0@-2 W0.0@-2 F0.1@0 F7.1@-1 B7.1@-1 W7.1@-1 B0.1@-2 "
          "W0.1@-2",
          "W6.1@-2 B1.0@-2 F1.0@0 B6.0@-1 W1.0@-2 W6.0@-1 F6.1@-1 F1.1@0 B1.1@-2 W1.1@-2 B6.1@-1 "
          "F6.0@0",
          "B5.1@-2 W2.0@-2 W5.1@-2 F5.1@-1 F2.0@0 B5.0@-1 B2.1@-2 W5.0@-1 W2.1@-2 F2.1@0 F5.0@0 "
          "B2.0@-1",
          "F3.1@-1 F4.1@-1 B4.1@-2 W4.1@-2 B3.1@-2 W3.1@-2 F3.0@0 B4.0@-1 F4.0@0 B3.0@-1 W4.0@-1 "
          "W3.0@-1"});
  const PipelineSpec spec = Spec(4, 32, 1, 1.5, 0.5, 0.2);
  const CostModel costs = CostModelFor(spec, 2);
  const Schedule shape = MakeEmptySchedule("cp-sat", 4, 32, VPlacement(4));
  const double period = CyclicPeriod(order, shape, costs);
  EXPECT_LE(period, 6.6 + 1e-9);
  EXPECT_GE(period, 6.0);  // the busiest worker's work for two microbatches
  for (double peak : CyclicPeaks(order, shape, costs)) EXPECT_LE(peak, 3.0 + 1e-9);
  for (int m : {1, 2, 7, 32}) {
    const Schedule s = Unroll(order, shape, m);
    EXPECT_TRUE(ValidateSchedule(s).ok()) << "m=" << m << ": " << ValidateSchedule(s);
  }
}

// At unit costs without transfers V-Half's steady state runs at the busiest worker's work: the
// search returns the start untouched without trying anything.
TEST(CyclicOrderTest, ComputeBoundSteadyStateIsLeftAlone) {
  const PipelineSpec spec = Spec(6, 48);
  const CostModel costs = CostModelFor(spec, 2);
  const absl::StatusOr<Schedule> plan = Generate("v-half", spec);
  ASSERT_TRUE(plan.ok());
  const std::optional<CyclicOrder> start = SteadyWindow(*plan, 2);
  ASSERT_TRUE(start.has_value());
  CyclicSearchOptions options;
  options.memory_cap = 4.0;
  const CyclicSearchResult r = ShortenPeriod(*start, *plan, costs, options);
  EXPECT_DOUBLE_EQ(r.start_period, 2 * 3.0);
  EXPECT_DOUBLE_EQ(r.period, r.start_period);
  EXPECT_EQ(Unroll(r.order, *plan, 48).worker_actions, Unroll(*start, *plan, 48).worker_actions);
  // Over the cap from the start: nothing to search either.
  options.memory_cap = 1.0;
  EXPECT_TRUE(std::isinf(ShortenPeriod(*start, *plan, costs, options).start_period));
}

}  // namespace
}  // namespace pipetrain::schedule
