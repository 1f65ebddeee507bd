// EmbeddingGradPlan (the CUDA backend's fixed summation order for the embedding table gradient),
// checked on the CPU: its structure, that both sort paths agree, and that executing it the way
// the CUDA kernels do (segments, then rows) gives the CPU backend's gradient: bitwise for ids
// with at most kEmbeddingSegmentTokens tokens (same order), within fp32 tolerance otherwise.
#include "kernels/embedding_grad_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace pipetrain::kernels {
namespace {

std::vector<int32_t> SkewedIds(int64_t n, int32_t vocab, uint32_t seed) {
  // About half the tokens are id 3 (a "heavy" id), the rest spread over the vocabulary.
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> any(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = (rng() % 2 == 0) ? 3 : any(rng);
  return ids;
}

// What the CUDA kernels compute from a plan: pass 1 per segment, pass 2 per distinct id.
void ApplyPlan(const EmbeddingGradPlan& plan, const std::vector<float>& dout, int64_t h,
               std::vector<float>* dwte) {
  const int32_t* pos = plan.packed.data();
  const int32_t* segs = plan.packed.data() + plan.segments_offset();
  std::vector<float> partial(static_cast<size_t>(plan.num_segments * h));
  for (int64_t s = 0; s < plan.num_segments; ++s) {
    for (int64_t j = 0; j < h; ++j) {
      float acc = 0.0f;
      for (int32_t p = segs[2 * s]; p < segs[2 * s + 1]; ++p) acc += dout[pos[p] * h + j];
      partial[s * h + j] = acc;
    }
  }
  for (int64_t r = 0; r < plan.num_rows; ++r) {
    const int32_t* row = plan.packed.data() + plan.rows_offset() + 5 * r;
    for (int64_t j = 0; j < h; ++j) {
      float acc = (*dwte)[row[0] * h + j];
      if (row[3] == row[4]) {
        for (int32_t p = row[1]; p < row[2]; ++p) acc += dout[pos[p] * h + j];
      } else {
        for (int32_t s = row[3]; s < row[4]; ++s) acc += partial[s * h + j];
      }
      (*dwte)[row[0] * h + j] = acc;
    }
  }
}

TEST(KernelEmbeddingGradPlanTest, GroupsTokensByIdInTokenOrderAndSegmentsHeavyIds) {
  const std::vector<int32_t> ids = SkewedIds(500, 40, 1);
  const EmbeddingGradPlan plan = BuildEmbeddingGradPlan(ids, 40, /*segment_tokens=*/32);
  ASSERT_EQ(plan.num_positions, 500);
  ASSERT_EQ(static_cast<int64_t>(plan.packed.size()),
            plan.num_positions + 5 * plan.num_rows + 2 * plan.num_segments);
  std::vector<bool> seen(500, false);
  int32_t previous_id = -1;
  int64_t covered = 0, heavy = 0;
  for (int64_t r = 0; r < plan.num_rows; ++r) {
    const int32_t* row = plan.packed.data() + plan.rows_offset() + 5 * r;
    EXPECT_GT(row[0], previous_id) << "distinct ids, ascending";
    previous_id = row[0];
    ASSERT_EQ(row[1], covered) << "rows tile the positions";
    for (int32_t p = row[1]; p < row[2]; ++p) {
      const int32_t token = plan.packed[p];
      EXPECT_EQ(ids[token], row[0]);
      EXPECT_FALSE(seen[token]);
      seen[token] = true;
      if (p > row[1]) {
        EXPECT_LT(plan.packed[p - 1], token) << "token order within an id";
      }
    }
    covered = row[2];
    const int32_t count = row[2] - row[1];
    if (count <= 32) {
      EXPECT_EQ(row[3], row[4]) << "a light id has no segments";
      continue;
    }
    ++heavy;
    int32_t expect_begin = row[1];
    for (int32_t s = row[3]; s < row[4]; ++s) {
      const int32_t* seg = plan.packed.data() + plan.segments_offset() + 2 * s;
      EXPECT_EQ(seg[0], expect_begin);
      EXPECT_LE(seg[1] - seg[0], 32);
      EXPECT_GT(seg[1], seg[0]);
      expect_begin = seg[1];
    }
    EXPECT_EQ(expect_begin, row[2]) << "segments tile the id's tokens";
  }
  EXPECT_EQ(covered, 500);
  EXPECT_EQ(heavy, 1) << "only id 3 has more than 32 tokens";
}

TEST(KernelEmbeddingGradPlanTest, CountingSortAndComparisonSortGiveTheSamePlan) {
  const std::vector<int32_t> ids = SkewedIds(300, 50, 2);
  // A small vocabulary takes the counting sort, a huge one (same ids) the comparison sort.
  EXPECT_EQ(BuildEmbeddingGradPlan(ids, 50).packed,
            BuildEmbeddingGradPlan(ids, int64_t{1} << 24).packed);
  EXPECT_EQ(BuildEmbeddingGradPlan({}, 50).packed.size(), 0u);
}

TEST(KernelEmbeddingGradPlanTest, ExecutingThePlanGivesTheCpuGradient) {
  const int64_t n = 600, h = 5, vocab = 30, seq_len = 6;
  const std::vector<int32_t> ids = SkewedIds(n, vocab, 3);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  std::vector<float> dout(n * h), start(vocab * h);
  for (float& v : dout) v = normal(rng);
  for (float& v : start) v = normal(rng);

  CpuBackend cpu;
  Tensor t_dout = *cpu.FromHost({n, h}, dout, "dout");
  Tensor dwte = *cpu.FromHost({vocab, h}, start, "dwte");
  Tensor dwpe = *cpu.Zeros({seq_len, h}, "dwpe");
  ASSERT_TRUE(cpu.EmbeddingBackward(ids, seq_len, t_dout, true, &dwte, &dwpe).ok());
  const std::vector<float> want = *cpu.ToVector(dwte);

  const EmbeddingGradPlan plan = BuildEmbeddingGradPlan(ids, vocab);
  std::vector<float> got = start;
  ApplyPlan(plan, dout, h, &got);
  std::vector<int> count(vocab, 0);
  for (int32_t id : ids) ++count[id];
  for (int64_t v = 0; v < vocab; ++v) {
    for (int64_t j = 0; j < h; ++j) {
      const float a = want[v * h + j], b = got[v * h + j];
      if (count[v] <= kEmbeddingSegmentTokens) {
        EXPECT_EQ(a, b) << "id " << v << " (" << count[v] << " tokens) column " << j;
      } else {
        EXPECT_NEAR(a, b, 1e-4 + 1e-5 * std::abs(a)) << "heavy id " << v << " column " << j;
      }
    }
  }
  ASSERT_GT(count[3], kEmbeddingSegmentTokens) << "the test must cover a segmented id";
}

}  // namespace
}  // namespace pipetrain::kernels
