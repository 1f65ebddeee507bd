// ModuloBlockVariants and ModuloLane (schedule/v_modulo_variants.h): the span to beat may come
// while the searches run, and the blocks are then the same as with it known from the start.
#include "schedule/v_modulo_variants.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/v_generators.h"
#include "schedule/v_pattern.h"

namespace pipetrain::schedule {
namespace {

CostModel Costs(int p, double b, double w, double comm) {
  CostModel costs = UniformCostModel(p, 2, 1.0, b, w);
  costs.comm = comm;
  return costs;
}

void ExpectSameBlocks(const std::vector<VVariant>& a, const std::vector<VVariant>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].label, b[k].label);
    ASSERT_TRUE(a[k].fixed_block.has_value() && b[k].fixed_block.has_value());
    EXPECT_EQ(a[k].fixed_block->interval, b[k].fixed_block->interval);
    ASSERT_EQ(a[k].fixed_block->passes.size(), b[k].fixed_block->passes.size());
    for (size_t i = 0; i < a[k].fixed_block->passes.size(); ++i) {
      EXPECT_EQ(a[k].fixed_block->passes[i].offset, b[k].fixed_block->passes[i].offset);
    }
  }
}

// The span told only after the first `late` questions (each asked before a search): the
// searches made meanwhile serve the bisection with the bound, which gives the blocks it gives
// with the bound known at once: no bound, V-Half's pattern span (which rules out long periods),
// and a span no block can beat (no blocks).
TEST(ModuloVariantsTest, ABoundLearnedLateGivesTheBlocksOfTheBoundKnownAtOnce) {
  struct Cell {
    int p, m;
    double b, w, comm, cap;
  };
  int speculated = 0, with_blocks = 0;
  for (const Cell& c :
       {Cell{8, 64, 1.5, 0.5, 0.2, 5}, Cell{6, 48, 2, 1, 0.2, 4}, Cell{8, 64, 2, 1, 0.2, 4}}) {
    const CostModel costs = Costs(c.p, c.b, c.w, c.comm);
    const VOrderEval pattern =
        EvaluateVOrder(MakeVPattern(VPatternKind::kHalf, c.p, c.m, "t"), costs);
    ASSERT_TRUE(pattern.ok);
    for (double beat : {1e300, pattern.max_span, 1.0}) {
      const std::vector<VVariant> at_once = ModuloBlockVariants(
          c.p, costs, c.cap, c.m, [&](bool) -> std::optional<double> { return beat; });
      with_blocks += !at_once.empty();
      if (beat == 1.0) {
        EXPECT_TRUE(at_once.empty()) << "no period can beat a span of 1";
      }
      for (int late : {1, 2, 4}) {
        int asked = 0;
        const std::vector<VVariant> learned =
            ModuloBlockVariants(c.p, costs, c.cap, c.m, [&](bool wait) -> std::optional<double> {
              if (!wait && ++asked <= late) return std::nullopt;
              return beat;
            });
        ExpectSameBlocks(learned, at_once);
        speculated += asked > 1;
      }
    }
    // A caller that gives up (no span, even when waited for): no blocks.
    EXPECT_TRUE(ModuloBlockVariants(c.p, costs, c.cap, c.m, [](bool) {
                  return std::optional<double>();
                }).empty());
  }
  EXPECT_GT(speculated, 0) << "no search ran before the bound was known";
  EXPECT_GT(with_blocks, 0);
}

// The lane gives ModuloBlockVariants' blocks for the span set after it started, on its own
// thread or (as on one core) in Take; a lane dropped before a span is set stops and joins.
TEST(ModuloVariantsTest, TheLaneGivesTheBlocksOfItsSpanAndCanBeDroppedUnset) {
  const CostModel costs = Costs(8, 1.5, 0.5, 0.2);
  const double cap = VHalfPeakLaw(8);
  const VOrderEval pattern = EvaluateVOrder(MakeVPattern(VPatternKind::kHalf, 8, 64, "t"), costs);
  ASSERT_TRUE(pattern.ok);
  const std::vector<VVariant> expected = ModuloBlockVariants(
      8, costs, cap, 64, [&](bool) { return std::optional<double>(pattern.max_span); });
  EXPECT_FALSE(expected.empty());
  for (bool own_thread : {true, false}) {
    ModuloLane lane(8, costs, cap, 64, own_thread);
    lane.SetBeat(pattern.max_span);
    ExpectSameBlocks(lane.Take(), expected);
  }
  { ModuloLane dropped(8, costs, cap, 64, /*own_thread=*/true); }
}

}  // namespace
}  // namespace pipetrain::schedule
