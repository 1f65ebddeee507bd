// Tests of the V-shape family and the building-block lifespan bound (auto_test.cc: the auto
// planner). Every number comes from the one Simulate and every schedule passes the one
// ValidateSchedule.
#include <algorithm>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "schedule/building_block.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "schedule/v_block_search.h"
#include "schedule/v_generators.h"
#include "schedule/v_pattern.h"
#include "schedule/validator.h"
#include "tests/schedule/test_util.h"
#include "tests/schedule_v/run_gen.h"

namespace pipetrain::schedule {
namespace {

using testing::Measured;
using testing::RunGen;
using testing::Spec;

TEST(VPlacementTest, WorkerHoldsStageAndMirror) {
  Schedule s = *Generate("v-half", Spec(4, 8));
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.stage_to_worker, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  for (const auto& list : s.worker_actions) {
    for (const Action& a : list)
      EXPECT_TRUE(a.kind == ActionKind::kF || a.kind == ActionKind::kB || a.kind == ActionKind::kW);
  }
}

// Exact memory laws with unit costs, p = 2..32: one CTest test per p (the large p take seconds
// each; together they were the suite's longest test).
class VPeakLawsTest : public ::testing::TestWithParam<int> {};

TEST_P(VPeakLawsTest, PeakMemoryLawsUnitCosts) {
  const int p = GetParam();
  for (int m : {p, 2 * p, 3 * p + 1}) {
    const PipelineSpec spec = Spec(p, m);
    EXPECT_DOUBLE_EQ(RunGen("v-min", spec).peak, (p + 4) / 3) << "p=" << p << " m=" << m;
    EXPECT_LE(RunGen("v-half", spec).peak, (p + 2) / 2) << "p=" << p << " m=" << m;
    EXPECT_LE(RunGen("v-zb", spec).peak, p) << "p=" << p << " m=" << m;
    EXPECT_LE(RunGen("zb-v", spec).peak, p) << "p=" << p << " m=" << m;
    EXPECT_DOUBLE_EQ(RunGen("1f1b", spec).peak, p);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryP, VPeakLawsTest, ::testing::Range(2, 33));

// Bubble with unit costs: v-half <= 0.6x 1F1B's, v-min <= 0.75x (measured 0.35-0.60x and
// 0.68-0.74x).
TEST(VLawsTest, BubbleUnitCosts) {
  for (int p : {4, 8, 16}) {
    for (int m : {2 * p, 4 * p}) {
      const PipelineSpec spec = Spec(p, m);
      const double one_f1b = RunGen("1f1b", spec).bubble;
      EXPECT_LE(RunGen("v-min", spec).bubble, 0.75 * one_f1b) << "p=" << p << " m=" << m;
      EXPECT_LE(RunGen("v-half", spec).bubble, 0.6 * one_f1b) << "p=" << p << " m=" << m;
    }
  }
}

// V-ZB / ZB-V (the ZB-V wave scheduler, v_zbv.h) at peak <= p: bubble <= 0.01 for m >= 2p,
// p <= 16, unit costs (measured exactly 0, as the authors' ZB-V scheduler); m = p is the warm-up-bound
// case (measured 0.127 at p = 8, the spec's anchor). Unequal costs: not zero (the warm-up and
// cool-down ramps cost a constant idle time), measured 1:2:1 <= 0.102 and 1:1.5:0.5 <= 0.134
// at m = 2p, falling ~1/m; asserted: <= 0.11 / 0.14 at m >= 2p and <= 0.45x 1F1B's.
TEST(VLawsTest, ZeroBubbleVUnitAndUnequalCosts) {
  for (int p : {2, 3, 4, 5, 6, 8, 12, 16}) {
    for (int m : {2 * p, 3 * p, 4 * p, 64}) {
      if (m < 2 * p) continue;
      for (const char* name : {"v-zb", "zb-v"}) {
        const std::string where =
            std::string(name) + " p=" + std::to_string(p) + " m=" + std::to_string(m);
        const Measured unit = RunGen(name, Spec(p, m));
        EXPECT_LE(unit.bubble, 0.01) << where;
        EXPECT_LE(unit.peak, p + 1e-9) << where;
        for (auto [b, w, bound] : {std::tuple{2.0, 1.0, 0.11}, std::tuple{1.5, 0.5, 0.14}}) {
          const PipelineSpec spec = Spec(p, m, 1.0, b, w);
          const Measured got = RunGen(name, spec);
          EXPECT_LE(got.bubble, bound) << where << " b=" << b;
          EXPECT_LE(got.bubble, 0.45 * RunGen("1f1b", spec).bubble) << where << " b=" << b;
          EXPECT_LE(got.peak, p + 1e-9) << where << " b=" << b;
        }
      }
    }
  }
}

// V-Half below 1F1B with F:B:W = 1:1:1, 1:2:1 and 1:1.5:0.5 (comm 0) over the full grid. The
// 1:1.5:0.5 cells at p >= 8, m >= 2p (e.g. p=16 m=64: 1F1B 0.190) are met by the searched
// building blocks (v_block_search.h; before them 0.220, now 0.163).
TEST(VLawsTest, VHalfBeats1F1BWithUnequalCosts) {
  for (int p : {2, 3, 4, 6, 8, 12, 16}) {
    for (int m : {p, 2 * p, 4 * p, 64}) {
      if (m < p) continue;
      for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, std::tuple{1.0, 2.0, 1.0},
                             std::tuple{1.0, 1.5, 0.5}}) {
        const PipelineSpec spec = Spec(p, m, f, b, w, 0.0);
        const Measured got = RunGen("v-half", spec);
        EXPECT_LT(got.bubble, RunGen("1f1b", spec).bubble)
            << "p=" << p << " m=" << m << " costs " << f << ":" << b << ":" << w;
        EXPECT_LE(got.peak, (p + 2) / 2 + 1e-9) << "p=" << p << " m=" << m;
      }
    }
  }
}

// Beyond issue 3's criterion (the test above): V-Half below 1F1B with comm 0.2 (F:B:W 1:1:1,
// 1:2:1, 1:1.5:0.5; p 2..16, m p/2p/4p/64): met at 67 of the 81 cells, NOT met at the 14
// listed below (docs/SCHEDULES.md, Known gaps).
// All 1:1:1 cells and every p = 2 cell are met; 1:2:1 fails at p=3 m=64, p=12 m>=48 and p=16
// m=64; 1:1.5:0.5 at m=64 for every p except 2 and 4, at p=8 m=32, p=12 m>=2p, p=16 m>=2p and
// p=3 m=12. At p=3 CP-SAT proves that no periodic V-Half schedule of one, two or three
// microbatches per period runs as fast as 1F1B's steady state (1:1.5:0.5), and over all orders
// at m=12 it found none below 1F1B's bubble (Known gaps).
// Why: the cap (p+2)//2 does not grow with comm, while a V microbatch's chain crosses 4p-4
// worker boundaries (1F1B's: 2p-2) with chunks half as long, so comm lengthens every lifespan.
// The cells left are the large-m ones: a steady state is what they need, and V-Half's is slower
// than 1F1B's. 1F1B's own steady state stalls with comm (each extra microbatch adds
// F+B+W + 2c(p-1)/p: 3.35 at p=8, 1:1.5:0.5). The modulo search (v_modulo_block.h) finds the
// shortest period at which ONE repeated block fits the cap (p=8 1:1.5:0.5: 3.6); the cyclic
// search (cyclic_order.h) interleaves two microbatches per period, which took p=4 m=64 from 3.4
// to 3.2 per microbatch (1F1B 3.3) but finds nothing shorter at p >= 6; the order polish
// (order_polish.h) recovers warm-up and cool-down, which flipped the small-m cells. With 1F1B's
// memory (p units) V-ZB beats 1F1B in every one of these cells. The lost cells' bubbles are
// pinned (upper bounds: they may only fall) and must stay within V-Half's memory; every other
// cell must beat 1F1B.
struct LostCell {
  int p, m;
  double b, w;    // f = 1
  double bubble;  // V-Half's bubble now (rounded up)
};
constexpr LostCell kLostWithComm[] = {
    {3, 12, 1.5, 0.5, 0.2191},    // 1F1B 0.2105
    {3, 64, 2, 1, 0.1081},        // 1F1B 0.0909
    {3, 64, 1.5, 0.5, 0.1387},    // 1F1B 0.1095
    {6, 64, 1.5, 0.5, 0.1687},    // 1F1B 0.1645
    {8, 32, 1.5, 0.5, 0.2801},    // 1F1B 0.2649
    {8, 64, 1.5, 0.5, 0.2279},    // 1F1B 0.1926
    {12, 24, 1.5, 0.5, 0.3985},   // 1F1B 0.3888
    {12, 48, 2, 1, 0.2602},       // 1F1B 0.2547
    {12, 48, 1.5, 0.5, 0.3122},   // 1F1B 0.2749
    {12, 64, 2, 1, 0.2324},       // 1F1B 0.2176
    {12, 64, 1.5, 0.5, 0.2855},   // 1F1B 0.2387
    {16, 32, 1.5, 0.5, 0.4179},   // 1F1B 0.3947
    {16, 64, 2, 1, 0.2636},       // 1F1B 0.2593
    {16, 64, 1.5, 0.5, 0.3299},   // 1F1B 0.2798
};

TEST(VLawsTest, VHalfVs1F1BWithComm) {
  int lost = 0;
  for (int p : {2, 3, 4, 6, 8, 12, 16}) {
    std::vector<int> ms = {p, 2 * p, 4 * p};
    if (64 > 4 * p) ms.push_back(64);
    for (int m : ms) {
      for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, std::tuple{1.0, 2.0, 1.0},
                             std::tuple{1.0, 1.5, 0.5}}) {
        const PipelineSpec spec = Spec(p, m, f, b, w, 0.2);
        const std::string where = "p=" + std::to_string(p) + " m=" + std::to_string(m) +
                                  " costs 1:" + std::to_string(b) + ":" + std::to_string(w);
        const Measured got = RunGen("v-half", spec);
        const double one_f_one_b = RunGen("1f1b", spec).bubble;
        EXPECT_LE(got.peak, (p + 2) / 2 + 1e-9) << where;
        const LostCell* cell = nullptr;
        for (const LostCell& c : kLostWithComm) {
          if (c.p == p && c.m == m && c.b == b && c.w == w) cell = &c;
        }
        if (cell == nullptr) {
          EXPECT_LT(got.bubble, one_f_one_b) << where;
          continue;
        }
        ++lost;
        EXPECT_GE(got.bubble, one_f_one_b) << where << ": now won, remove it from kLostWithComm";
        EXPECT_LE(got.bubble, cell->bubble) << where;
        EXPECT_LT(RunGen("v-zb", spec).bubble, one_f_one_b) << where << " at 1F1B's memory";
      }
    }
  }
  EXPECT_EQ(lost, static_cast<int>(std::size(kLostWithComm)));
}

// Against the authors' fixed V-Min / V-Half pattern (v_pattern.h, without their
// reorder passes), timed by the same Simulate: pipetrain matches or beats its bubble at equal
// or lower peak memory, for unit and unequal costs and comm > 0.
TEST(VBaselineTest, MatchesOrBeatsFixedPattern) {
  for (int p : {2, 3, 4, 6, 8, 12}) {
    for (int m : {p, 2 * p, 4 * p}) {
      for (auto [f, b, w, c] : {std::tuple{1.0, 1.0, 1.0, 0.0}, std::tuple{1.0, 2.0, 1.0, 0.0},
                                std::tuple{1.0, 1.5, 0.5, 0.1}}) {
        const PipelineSpec spec = Spec(p, m, f, b, w, c);
        const CostModel costs = CostModelFor(spec, 2);
        for (auto [name, kind] :
             {std::pair{"v-min", VPatternKind::kMin}, std::pair{"v-half", VPatternKind::kHalf}}) {
          absl::StatusOr<SimResult> ref = Simulate(MakeVPattern(kind, p, m, "ref"), costs);
          ASSERT_TRUE(ref.ok()) << ref.status();
          const double ref_peak = MaxPeak(*ref);
          const Measured got = RunGen(name, spec);
          const std::string where = std::string(name) + " p=" + std::to_string(p) +
                                    " m=" + std::to_string(m) + " b=" + std::to_string(b);
          EXPECT_LE(got.peak, ref_peak + 1e-9) << where;
          EXPECT_LE(got.bubble, ref->bubble_ratio + 1e-9) << where;
        }
      }
    }
  }
}

// Quality pinned before the generation-speed work (bench/schedule_v/v_golden_dump on the
// pre-optimisation code): the pruned candidate searches must find the same plans, so every
// generator's bubble and peak must stay at (or below) these values. v-adaptive and auto run
// with memory_limit = (p+2)/2 + 0.5 (p mod 3).
struct Pinned {
  const char* name;
  int p, m;
  double f, b, w, comm;
  double bubble, peak;
};

TEST(VBaselineTest, QualityPinnedBeforeSpeedWork) {
  const Pinned kPinned[] = {
    {"v-min", 4, 8, 1, 1, 1, 0, 0.186440678, 2},
    {"v-half", 4, 8, 1, 1, 1, 0, 0.0943396226, 3},
    {"v-zb", 4, 8, 1, 1, 1, 0, 0, 4},
    {"zb-v", 4, 8, 1, 1, 1, 0, 0, 4},
    {"v-adaptive", 4, 8, 1, 1, 1, 0, 0.0943396226, 3.5},
    {"auto", 4, 8, 1, 1, 1, 0, 0.0943396226, 3.5},
    {"v-min", 4, 8, 1, 2, 1, 0, 0.340206186, 2},
    {"v-half", 4, 8, 1, 2, 1, 0, 0.189873418, 3},
    {"v-zb", 4, 8, 1, 2, 1, 0, 0.0724637681, 4},
    {"zb-v", 4, 8, 1, 2, 1, 0, 0.0724637681, 4},
    {"v-adaptive", 4, 8, 1, 2, 1, 0, 0.168831169, 3.5},
    {"auto", 4, 8, 1, 2, 1, 0, 0.168831169, 3.5},
    {"v-min", 4, 8, 1, 1.5, 0.5, 0, 0.368421053, 2},
    {"v-half", 4, 8, 1, 1.5, 0.5, 0, 0.20661157, 3},
    {"v-zb", 4, 8, 1, 1.5, 0.5, 0, 0.102803738, 4},
    {"zb-v", 4, 8, 1, 1.5, 0.5, 0, 0.102803738, 4},
    {"v-adaptive", 4, 8, 1, 1.5, 0.5, 0, 0.213114754, 3.5},
    {"auto", 4, 8, 1, 1.5, 0.5, 0, 0.20661157, 3},
    {"v-min", 4, 8, 1, 1, 1, 0.2, 0.36, 2},
    {"v-half", 4, 8, 1, 1, 1, 0.2, 0.233226837, 3},
    {"v-zb", 4, 8, 1, 1, 1, 0.2, 0.114391144, 4},
    {"zb-v", 4, 8, 1, 1, 1, 0.2, 0.114391144, 4},
    {"v-adaptive", 4, 8, 1, 1, 1, 0.2, 0.218241042, 3.5},
    {"auto", 4, 8, 1, 1, 1, 0.2, 0.218241042, 3.5},
    {"v-min", 4, 8, 1, 2, 1, 0.3, 0.454855196, 2},
    {"v-half", 4, 8, 1, 2, 1, 0.3, 0.336099585, 3},
    {"v-zb", 4, 8, 1, 2, 1, 0.3, 0.187817259, 4},
    {"zb-v", 4, 8, 1, 2, 1, 0.3, 0.187817259, 4},
    {"v-adaptive", 4, 8, 1, 2, 1, 0.3, 0.308855292, 3.5},
    {"auto", 4, 8, 1, 2, 1, 0.3, 0.308855292, 3.5},
    {"v-min", 4, 35, 1, 1, 1, 0, 0.0497737557, 2},
    {"v-half", 4, 35, 1, 1, 1, 0, 0.0322580645, 3},
    {"v-zb", 4, 35, 1, 1, 1, 0, 0, 4},
    {"zb-v", 4, 35, 1, 1, 1, 0, 0, 4},
    {"v-adaptive", 4, 35, 1, 1, 1, 0, 0.023255814, 3.5},
    {"auto", 4, 35, 1, 1, 1, 0, 0.023255814, 3.5},
    {"v-min", 4, 35, 1, 2, 1, 0, 0.232876712, 2},
    {"v-half", 4, 35, 1, 2, 1, 0, 0.0378006873, 3},
    {"v-zb", 4, 35, 1, 2, 1, 0, 0.0175438596, 4},
    {"zb-v", 4, 35, 1, 2, 1, 0, 0.0175438596, 4},
    {"v-adaptive", 4, 35, 1, 2, 1, 0, 0.0572390572, 3.5},
    {"auto", 4, 35, 1, 2, 1, 0, 0.0378006873, 3},
    {"v-min", 4, 35, 1, 1.5, 0.5, 0, 0.284497445, 2},
    {"v-half", 4, 35, 1, 1.5, 0.5, 0, 0.0687361419, 3},
    {"v-zb", 4, 35, 1, 1.5, 0.5, 0, 0.0255220418, 4},
    {"zb-v", 4, 35, 1, 1.5, 0.5, 0, 0.0255220418, 4},
    {"v-adaptive", 4, 35, 1, 1.5, 0.5, 0, 0.0707964602, 3.5},
    {"auto", 4, 35, 1, 1.5, 0.5, 0, 0.0687361419, 3},
    {"v-min", 4, 35, 1, 1, 1, 0.2, 0.250535332, 2},
    {"v-half", 4, 35, 1, 1, 1, 0.2, 0.0574506284, 3},
    {"v-zb", 4, 35, 1, 1, 1, 0.2, 0.0286771508, 4},
    {"zb-v", 4, 35, 1, 1, 1, 0.2, 0.0286771508, 4},
    {"v-adaptive", 4, 35, 1, 1, 1, 0.2, 0.0497737557, 3.5},
    {"auto", 4, 35, 1, 1, 1, 0.2, 0.0497737557, 3.5},
    {"v-min", 4, 35, 1, 2, 1, 0.3, 0.353945547, 2},
    {"v-half", 4, 35, 1, 2, 1, 0.3, 0.190751445, 3},
    {"v-zb", 4, 35, 1, 2, 1, 0.3, 0.0502035278, 4},
    {"zb-v", 4, 35, 1, 2, 1, 0.3, 0.0502035278, 4},
    {"v-adaptive", 4, 35, 1, 2, 1, 0.3, 0.137399877, 3.5},
    {"auto", 4, 35, 1, 2, 1, 0.3, 0.137399877, 3.5},
    {"v-min", 7, 14, 1, 1, 1, 0, 0.214953271, 3},
    {"v-half", 7, 14, 1, 1, 1, 0, 0.168316832, 4},
    {"v-zb", 7, 14, 1, 1, 1, 0, 0, 7},
    {"zb-v", 7, 14, 1, 1, 1, 0, 0, 7},
    {"v-adaptive", 7, 14, 1, 1, 1, 0, 0.184466019, 4.5},
    {"auto", 7, 14, 1, 1, 1, 0, 0.168316832, 4},
    {"v-min", 7, 14, 1, 2, 1, 0, 0.394594595, 3},
    {"v-half", 7, 14, 1, 2, 1, 0, 0.304347826, 4},
    {"v-zb", 7, 14, 1, 2, 1, 0, 0.0894308943, 7},
    {"zb-v", 7, 14, 1, 2, 1, 0, 0.0894308943, 7},
    {"v-adaptive", 7, 14, 1, 2, 1, 0, 0.253333333, 4.5},
    {"auto", 7, 14, 1, 2, 1, 0, 0.253333333, 4.5},
    {"v-min", 7, 14, 1, 1.5, 0.5, 0, 0.44, 3},
    {"v-half", 7, 14, 1, 1.5, 0.5, 0, 0.302904564, 4},
    {"v-zb", 7, 14, 1, 1.5, 0.5, 0, 0.120418848, 7},
    {"zb-v", 7, 14, 1, 1.5, 0.5, 0, 0.120418848, 7},
    {"v-adaptive", 7, 14, 1, 1.5, 0.5, 0, 0.294117647, 4.5},
    {"auto", 7, 14, 1, 1.5, 0.5, 0, 0.294117647, 4.5},
    {"v-min", 7, 14, 1, 1, 1, 0.2, 0.4092827, 3},
    {"v-half", 7, 14, 1, 1, 1, 0.2, 0.282051282, 4},
    {"v-zb", 7, 14, 1, 1, 1, 0.2, 0.137577002, 7},
    {"zb-v", 7, 14, 1, 1, 1, 0.2, 0.137577002, 7},
    {"v-adaptive", 7, 14, 1, 1, 1, 0.2, 0.282051282, 4},
    {"auto", 7, 14, 1, 1, 1, 0.2, 0.282051282, 4},
    {"v-min", 7, 14, 1, 2, 1, 0.3, 0.552, 3},
    {"v-half", 7, 14, 1, 2, 1, 0.3, 0.418483904, 4},
    {"v-zb", 7, 14, 1, 2, 1, 0.3, 0.22005571, 7},
    {"zb-v", 7, 14, 1, 2, 1, 0.3, 0.22005571, 7},
    {"v-adaptive", 7, 14, 1, 2, 1, 0.3, 0.418483904, 4},
    {"auto", 7, 14, 1, 2, 1, 0.3, 0.418483904, 4},
    {"v-min", 7, 59, 1, 1, 1, 0, 0.0610079576, 3},
    {"v-half", 7, 59, 1, 1, 1, 0, 0.0458221024, 4},
    {"v-zb", 7, 59, 1, 1, 1, 0, 0, 7},
    {"zb-v", 7, 59, 1, 1, 1, 0, 0, 7},
    {"v-adaptive", 7, 59, 1, 1, 1, 0, 0.0509383378, 4.5},
    {"auto", 7, 59, 1, 1, 1, 0, 0.0458221024, 4},
    {"v-min", 7, 59, 1, 2, 1, 0, 0.290225564, 3},
    {"v-half", 7, 59, 1, 2, 1, 0, 0.166077739, 4},
    {"v-zb", 7, 59, 1, 2, 1, 0, 0.0227743271, 7},
    {"zb-v", 7, 59, 1, 2, 1, 0, 0.0227743271, 7},
    {"v-adaptive", 7, 59, 1, 2, 1, 0, 0.121042831, 4.5},
    {"auto", 7, 59, 1, 2, 1, 0, 0.121042831, 4.5},
    {"v-min", 7, 59, 1, 1.5, 0.5, 0, 0.331444759, 3},
    {"v-half", 7, 59, 1, 1.5, 0.5, 0, 0.142857143, 4},
    {"v-zb", 7, 59, 1, 1.5, 0.5, 0, 0.0314637483, 7},
    {"zb-v", 7, 59, 1, 1.5, 0.5, 0, 0.0314637483, 7},
    {"v-adaptive", 7, 59, 1, 1.5, 0.5, 0, 0.142857143, 4},
    {"auto", 7, 59, 1, 1.5, 0.5, 0, 0.142857143, 4},
    {"v-min", 7, 59, 1, 1, 1, 0.2, 0.295662555, 3},
    {"v-half", 7, 59, 1, 1, 1, 0.2, 0.0852713178, 4},
    {"v-zb", 7, 59, 1, 1, 1, 0.2, 0.0364725095, 7},
    {"zb-v", 7, 59, 1, 1, 1, 0.2, 0.0364725095, 7},
    {"v-adaptive", 7, 59, 1, 1, 1, 0.2, 0.0852713178, 4},
    {"auto", 7, 59, 1, 1, 1, 0.2, 0.0852713178, 4},
    {"v-min", 7, 59, 1, 2, 1, 0.3, 0.461801596, 3},
    {"v-half", 7, 59, 1, 2, 1, 0.3, 0.282238443, 4},
    {"v-zb", 7, 59, 1, 2, 1, 0.3, 0.0627482129, 7},
    {"zb-v", 7, 59, 1, 2, 1, 0.3, 0.0627482129, 7},
    {"v-adaptive", 7, 59, 1, 2, 1, 0.3, 0.282238443, 4},
    {"auto", 7, 59, 1, 2, 1, 0.3, 0.282238443, 4},
    {"v-min", 16, 32, 1, 1, 1, 0, 0.235059761, 6},
    {"v-half", 16, 32, 1, 1, 1, 0, 0.189873418, 9},
    {"v-zb", 16, 32, 1, 1, 1, 0, 0, 16},
    {"zb-v", 16, 32, 1, 1, 1, 0, 0, 16},
    {"v-adaptive", 16, 32, 1, 1, 1, 0, 0.19665272, 9.5},
    {"auto", 16, 32, 1, 1, 1, 0, 0.189873418, 9},
    {"v-min", 16, 32, 1, 2, 1, 0, 0.454157783, 6},
    {"v-half", 16, 32, 1, 2, 1, 0, 0.286908078, 9},
    {"v-zb", 16, 32, 1, 2, 1, 0, 0.101754386, 16},
    {"zb-v", 16, 32, 1, 2, 1, 0, 0.101754386, 16},
    {"v-adaptive", 16, 32, 1, 2, 1, 0, 0.322751323, 9},
    {"auto", 16, 32, 1, 2, 1, 0, 0.286908078, 9},
    {"v-min", 16, 32, 1, 1.5, 0.5, 0, 0.465924896, 6},
    {"v-half", 16, 32, 1, 1.5, 0.5, 0, 0.323943662, 9},
    {"v-zb", 16, 32, 1, 1.5, 0.5, 0, 0.133182844, 16},
    {"zb-v", 16, 32, 1, 1.5, 0.5, 0, 0.133182844, 16},
    {"v-adaptive", 16, 32, 1, 1.5, 0.5, 0, 0.323943662, 9},
    {"auto", 16, 32, 1, 1.5, 0.5, 0, 0.323943662, 9},
    {"v-min", 16, 32, 1, 1, 1, 0.2, 0.441535777, 6},
    {"v-half", 16, 32, 1, 1, 1, 0.2, 0.305354559, 9},
    {"v-zb", 16, 32, 1, 1, 1, 0.2, 0.154185022, 16},
    {"zb-v", 16, 32, 1, 1, 1, 0.2, 0.154185022, 16},
    {"v-adaptive", 16, 32, 1, 1, 1, 0.2, 0.305354559, 9},
    {"auto", 16, 32, 1, 1, 1, 0.2, 0.305354559, 9},
    {"v-min", 16, 32, 1, 2, 1, 0.3, 0.579085827, 6},
    {"v-half", 16, 32, 1, 2, 1, 0.3, 0.439334209, 9},
    {"v-zb", 16, 32, 1, 2, 1, 0.3, 0.24260355, 16},
    {"zb-v", 16, 32, 1, 2, 1, 0.3, 0.24260355, 16},
    {"v-adaptive", 16, 32, 1, 2, 1, 0.3, 0.439334209, 9},
    {"auto", 16, 32, 1, 2, 1, 0.3, 0.439334209, 9},
    {"v-min", 16, 131, 1, 1, 1, 0, 0.0698224852, 6},
    {"v-half", 16, 131, 1, 1, 1, 0, 0.0541516245, 9},
    {"v-zb", 16, 131, 1, 1, 1, 0, 0, 16},
    {"zb-v", 16, 131, 1, 1, 1, 0, 0, 16},
    {"v-adaptive", 16, 131, 1, 1, 1, 0, 0.056422569, 9.5},
    {"auto", 16, 131, 1, 1, 1, 0, 0.0541516245, 9},
    {"v-min", 16, 131, 1, 2, 1, 0, 0.367531684, 6},
    {"v-half", 16, 131, 1, 2, 1, 0, 0.0894874023, 9},
    {"v-zb", 16, 131, 1, 2, 1, 0, 0.0269266481, 16},
    {"zb-v", 16, 131, 1, 2, 1, 0, 0.0269266481, 16},
    {"v-adaptive", 16, 131, 1, 2, 1, 0, 0.174152876, 9},
    {"auto", 16, 131, 1, 2, 1, 0, 0.0894874023, 9},
    {"v-min", 16, 131, 1, 1.5, 0.5, 0, 0.371451419, 6},
    {"v-half", 16, 131, 1, 1.5, 0.5, 0, 0.152560647, 9},
    {"v-zb", 16, 131, 1, 1.5, 0.5, 0, 0.0361741263, 16},
    {"zb-v", 16, 131, 1, 1.5, 0.5, 0, 0.0361741263, 16},
    {"v-adaptive", 16, 131, 1, 1.5, 0.5, 0, 0.152560647, 9},
    {"auto", 16, 131, 1, 1.5, 0.5, 0, 0.152560647, 9},
    {"v-min", 16, 131, 1, 1, 1, 0.2, 0.322530598, 6},
    {"v-half", 16, 131, 1, 1, 1, 0.2, 0.0969669118, 9},
    {"v-zb", 16, 131, 1, 1, 1, 0.2, 0.0426309379, 16},
    {"zb-v", 16, 131, 1, 1, 1, 0.2, 0.0426309379, 16},
    {"v-adaptive", 16, 131, 1, 1, 1, 0.2, 0.0969669118, 9},
    {"auto", 16, 131, 1, 1, 1, 0.2, 0.0969669118, 9},
    {"v-min", 16, 131, 1, 2, 1, 0.3, 0.507935017, 6},
    {"v-half", 16, 131, 1, 2, 1, 0.3, 0.293610138, 9},
    {"v-zb", 16, 131, 1, 2, 1, 0.3, 0.0725663717, 16},
    {"zb-v", 16, 131, 1, 2, 1, 0.3, 0.0725663717, 16},
    {"v-adaptive", 16, 131, 1, 2, 1, 0.3, 0.293610138, 9},
    {"auto", 16, 131, 1, 2, 1, 0.3, 0.293610138, 9},
    {"v-min", 32, 64, 1, 1, 1, 0, 0.24260355, 12},
    {"v-half", 32, 64, 1, 1, 1, 0, 0.194968553, 17},
    {"v-zb", 32, 64, 1, 1, 1, 0, 0, 32},
    {"zb-v", 32, 64, 1, 1, 1, 0, 0, 32},
    {"v-adaptive", 32, 64, 1, 1, 1, 0, 0.2, 18},
    {"auto", 32, 64, 1, 1, 1, 0, 0.194968553, 17},
    {"v-min", 32, 64, 1, 2, 1, 0, 0.460484721, 12},
    {"v-half", 32, 64, 1, 2, 1, 0, 0.295735901, 17},
    {"v-zb", 32, 64, 1, 2, 1, 0, 0.106457243, 32},
    {"zb-v", 32, 64, 1, 2, 1, 0, 0.106457243, 32},
    {"v-adaptive", 32, 64, 1, 2, 1, 0, 0.32808399, 17},
    {"auto", 32, 64, 1, 2, 1, 0, 0.295735901, 17},
    {"v-min", 32, 64, 1, 1.5, 0.5, 0, 0.472164948, 12},
    {"v-half", 32, 64, 1, 1.5, 0.5, 0, 0.328671329, 17},
    {"v-zb", 32, 64, 1, 1.5, 0.5, 0, 0.138047138, 32},
    {"zb-v", 32, 64, 1, 1.5, 0.5, 0, 0.138047138, 32},
    {"v-adaptive", 32, 64, 1, 1.5, 0.5, 0, 0.328671329, 17},
    {"auto", 32, 64, 1, 1.5, 0.5, 0, 0.328671329, 17},
    {"v-min", 32, 64, 1, 1, 1, 0.2, 0.453769559, 12},
    {"v-half", 32, 64, 1, 1, 1, 0.2, 0.309849029, 17},
    {"v-zb", 32, 64, 1, 1, 1, 0.2, 0.160472234, 32},
    {"zb-v", 32, 64, 1, 1, 1, 0.2, 0.160472234, 32},
    {"v-adaptive", 32, 64, 1, 1, 1, 0.2, 0.309849029, 17},
    {"auto", 32, 64, 1, 1, 1, 0.2, 0.309849029, 17},
    {"v-min", 32, 64, 1, 2, 1, 0.3, 0.587695281, 12},
    {"v-half", 32, 64, 1, 2, 1, 0.3, 0.445767482, 17},
    {"v-zb", 32, 64, 1, 2, 1, 0.3, 0.251023991, 32},
    {"zb-v", 32, 64, 1, 2, 1, 0.3, 0.251023991, 32},
    {"v-adaptive", 32, 64, 1, 2, 1, 0.3, 0.445767482, 17},
    {"auto", 32, 64, 1, 2, 1, 0.3, 0.445767482, 17},
    {"v-min", 64, 1024, 1, 1, 1, 0, 0.0392494136, 22},
    {"v-half", 64, 1024, 1, 1, 1, 0, 0.029843676, 33},
    {"v-zb", 64, 1024, 1, 1, 1, 0, 0, 64},
    {"zb-v", 64, 1024, 1, 1, 1, 0, 0, 64},
    {"v-min", 64, 1024, 1, 1, 1, 0.2, 0.310576988, 22},
    {"v-half", 64, 1024, 1, 1, 1, 0.2, 0.0536627441, 33},
    {"v-zb", 64, 1024, 1, 1, 1, 0.2, 0.0238632392, 64},
    {"zb-v", 64, 1024, 1, 1, 1, 0.2, 0.0238632392, 64},
  };
  for (const Pinned& c : kPinned) {
    PipelineSpec spec = Spec(c.p, c.m, c.f, c.b, c.w, c.comm);
    const std::string name = c.name;
    if (name == "v-adaptive" || name == "auto") {
      spec.memory_limit = (c.p + 2) / 2 + 0.5 * (c.p % 3);
    }
    const Measured got = RunGen(name, spec);
    const std::string where = name + " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m) +
                              " costs " + std::to_string(c.f) + ":" + std::to_string(c.b) + ":" +
                              std::to_string(c.w) + " comm " + std::to_string(c.comm);
    EXPECT_LE(got.bubble, c.bubble + 1e-7) << where;
    // The same peak or lower; a higher one only for a strictly lower bubble, within the cap.
    if (got.bubble < c.bubble - 1e-7) {
      const double cap = name == "v-min"    ? (c.p + 4) / 3
                         : name == "v-half" ? (c.p + 2) / 2
                         : spec.memory_limit > 0 ? spec.memory_limit
                                                 : c.p;
      EXPECT_LE(got.peak, cap + 1e-9) << where;
    } else {
      EXPECT_LE(got.peak, c.peak + 1e-9) << where;
    }
  }
}

// The lifespan bound holds for the repeated block, squeezed by Simulate.
TEST(BuildingBlockTest, LifespanBoundCoversSimulatedPeak) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.3, 2.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int p = 2 + trial % 12, m = 1 + (trial * 7) % 40;
    const CostModel costs =
        UniformCostModel(p, 2, cost(rng), cost(rng), cost(rng), trial % 3 == 0 ? 0.1 : 0.0);
    VBlockShape shape;
    shape.f0_gap = trial % 3;
    shape.b1_gap = trial % 2;
    shape.period_stretch = 0.1 * (trial % 4);
    const BuildingBlock block = MakeVBlock(p, costs, shape);
    const Schedule s = RepeatBlock(block, m, "block");
    ASSERT_TRUE(ValidateSchedule(s).ok());
    absl::StatusOr<SimResult> r = Simulate(s, costs);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<double> bound = LifespanPeakBound(block, costs);
    for (int w = 0; w < p; ++w) EXPECT_LE(r->peak_memory[w], bound[w] + 1e-9) << "trial " << trial;
  }
}

// The block search (v_block_search.h) with 1:1.5:0.5: the cheapest block repeats at the busiest
// worker's work (period 3 = F+B+W, i.e. a zero-bubble steady state), its repetition is valid,
// the lifespan bound covers the simulated peak, and some returned block fits V-Half's memory.
TEST(BuildingBlockTest, SearchedBlockZeroBubblePeriodFitsVHalf) {
  for (int p : {4, 8, 12, 16}) {
    const CostModel costs = UniformCostModel(p, 2, 1.0, 1.5, 0.5);
    VBlockSearchOptions options;
    options.slots = ChooseVBlockSlots(p, costs);
    EXPECT_EQ(options.slots, 12) << "0.25 time units per slot represent 0.5/0.75/0.25 exactly";
    options.max_wait = 2;
    options.beam = 32;
    const std::vector<BuildingBlock> found = SearchVBlocks(p, costs, options);
    ASSERT_FALSE(found.empty()) << "p=" << p;
    double best_peak = 1e9;
    for (const BuildingBlock& block : found) {
      EXPECT_DOUBLE_EQ(block.interval, 3.0) << "p=" << p;
      const Schedule s = RepeatBlock(block, 4 * p, "searched");
      ASSERT_TRUE(ValidateSchedule(s).ok()) << "p=" << p;
      absl::StatusOr<SimResult> r = Simulate(s, costs);
      ASSERT_TRUE(r.ok()) << r.status();
      const std::vector<double> bound = LifespanPeakBound(block, costs);
      for (int w = 0; w < p; ++w) EXPECT_LE(r->peak_memory[w], bound[w] + 1e-9) << "p=" << p;
      best_peak = std::min(best_peak, MaxPeak(*r));
    }
    EXPECT_LE(best_peak, (p + 2) / 2) << "p=" << p;
  }
}

TEST(BuildingBlockTest, TightBlockUnitCostsIsVMinMemory) {
  for (int p : {4, 8, 16}) {
    const CostModel costs = UniformCostModel(p, 2, 1, 1, 1);
    const BuildingBlock block = MakeVBlock(p, costs, VBlockShape{});
    EXPECT_DOUBLE_EQ(block.interval, 3.0);
    absl::StatusOr<SimResult> r = Simulate(RepeatBlock(block, 4 * p, "b"), costs);
    ASSERT_TRUE(r.ok());
    EXPECT_LE(MaxPeak(*r), (p + 4) / 3);
  }
}

TEST(VSpecTest, RejectsBadFields) {
  EXPECT_EQ(Generate("v-half", Spec(1, 4)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Generate("v-half", Spec(1, 4)).status().message().find("num_workers"),
            std::string::npos);
  PipelineSpec spec = Spec(4, 4);
  spec.chunks_per_worker = 3;
  EXPECT_EQ(Generate("v-min", spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = Spec(4, 4);
  spec.memory_limit = 0.5;
  EXPECT_EQ(Generate("v-zb", spec).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Generate("v-adaptive", Spec(4, 4)).status().code(), absl::StatusCode::kInvalidArgument);
}

// Random cases through every V generator and auto: every p in 2..12 against six regimes of m
// (m = 1, m < p, m = p, p < m < 2p, m = 2p, 2p < m <= 30: what decides the warm-up, the steady
// state and the cool-down), F, B and W drawn from [0.2, 3] and a transfer cost on every other
// case; every sixth case (11, one per p, every limit met) is also run under a memory limit of
// 1..7 units (v-adaptive and auto). 66 cases in 16 shards, so that CTest spreads them over the
// cores. (It drew 520 cases with p and m uniform before, 52 of them with a limit: the same
// ranges of p, m, costs and limits, but ~5 min of CPU in all; the regimes make sure every p
// meets every kind of m with fewer cases.)
constexpr int kPropertyRegimes = 6;
constexpr int kPropertyShards = 16;

int RegimeMicrobatches(int p, int regime, std::mt19937& rng) {
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  switch (regime) {
    case 0: return 1;
    case 1: return pick(1, p - 1);
    case 2: return p;
    case 3: return pick(p + 1, 2 * p - 1);
    case 4: return 2 * p;
    default: return pick(2 * p + 1, 30);
  }
}

class VPropertyTest : public ::testing::TestWithParam<int> {};

TEST_P(VPropertyTest, RandomCasesValidateAndRespectLaws) {
  std::mt19937 rng(20240521);
  std::uniform_real_distribution<double> cd(0.2, 3.0);
  int trial = 0;
  for (int p = 2; p <= 12; ++p) {
    for (int regime = 0; regime < kPropertyRegimes; ++regime, ++trial) {
      const int m = RegimeMicrobatches(p, regime, rng);
      const double f = cd(rng), b = cd(rng), w = cd(rng);
      PipelineSpec spec = Spec(p, m, f, b, w, trial % 2 ? 0.0 : 0.3 * cd(rng));
      if (trial % kPropertyShards != GetParam()) continue;  // the stream is drawn in full above
      const std::string where =
          "trial " + std::to_string(trial) + " p=" + std::to_string(p) + " m=" + std::to_string(m);
      EXPECT_LE(RunGen("v-min", spec).peak, (p + 4) / 3 + 1e-9) << where;
      EXPECT_LE(RunGen("v-half", spec).peak, (p + 2) / 2 + 1e-9) << where;
      EXPECT_LE(RunGen("v-zb", spec).peak, p + 1e-9) << where;
      EXPECT_LE(RunGen("zb-v", spec).peak, p + 1e-9) << where;
      if (trial % 6 == 0) {
        spec.memory_limit = 1.0 + (trial / 6) % 7;
        EXPECT_LE(RunGen("v-adaptive", spec).peak, spec.memory_limit + 1e-9) << where;
        EXPECT_LE(RunGen("auto", spec).peak, spec.memory_limit + 1e-9) << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, VPropertyTest, ::testing::Range(0, kPropertyShards));

}  // namespace
}  // namespace pipetrain::schedule
