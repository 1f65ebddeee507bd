// The NCCL communicator groups of a d x p job (common/nccl_groups.h): every rank is in exactly
// one pipeline group (p > 1) and one stage group (d > 1), at the place the job-rank layout
// q * p + w gives it, and each group's id comes from its rank 0.
#include "common/nccl_groups.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace pipetrain {
namespace {

TEST(NcclGroupsTest, ThreeReplicasOfAFourRankPipeline) {
  auto groups = NcclGroupsOf(4, 3);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->size(), 3u + 4u);
  // Pipeline groups: replica q's consecutive ranks, created by q * p.
  EXPECT_EQ((*groups)[0].kind, NcclGroupKind::kPipeline);
  EXPECT_EQ((*groups)[0].members, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ((*groups)[1].members, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ((*groups)[2].members, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ((*groups)[2].index, 2);
  EXPECT_EQ((*groups)[2].creator(), 8);
  // Stage groups: pipeline rank w of every replica, created by replica 0's rank w.
  EXPECT_EQ((*groups)[3].kind, NcclGroupKind::kStage);
  EXPECT_EQ((*groups)[3].members, (std::vector<int>{0, 4, 8}));
  EXPECT_EQ((*groups)[5].members, (std::vector<int>{2, 6, 10}));
  EXPECT_EQ((*groups)[5].index, 2);
  EXPECT_EQ((*groups)[5].creator(), 2);
  EXPECT_EQ((*groups)[6].members, (std::vector<int>{3, 7, 11}));
}

TEST(NcclGroupsTest, EveryRankIsInOneGroupOfEachKindAtItsPlace) {
  for (int p : {1, 2, 3, 8}) {
    for (int d : {1, 2, 5}) {
      auto groups = NcclGroupsOf(p, d);
      ASSERT_TRUE(groups.ok()) << groups.status();
      std::map<int, int> pipeline_count, stage_count;
      for (const NcclGroup& g : *groups) {
        for (int r : g.members) {
          (g.kind == NcclGroupKind::kPipeline ? pipeline_count : stage_count)[r]++;
        }
      }
      for (int r = 0; r < d * p; ++r) {
        const int q = r / p, w = r % p;
        auto pipeline = PipelineGroupOf(r, p, d);
        auto stage = StageGroupOf(r, p, d);
        if (p > 1) {
          ASSERT_TRUE(pipeline.ok()) << pipeline.status();
          EXPECT_EQ(pipeline_count[r], 1) << p << "x" << d << " rank " << r;
          EXPECT_EQ(pipeline->group.index, q);
          EXPECT_EQ(pipeline->rank_in_group, w);
          EXPECT_EQ(pipeline->group.members[w], r);
          EXPECT_EQ(pipeline->group.creator(), q * p);
        } else {
          EXPECT_EQ(pipeline.status().code(), absl::StatusCode::kNotFound);
          EXPECT_EQ(pipeline_count[r], 0);
        }
        if (d > 1) {
          ASSERT_TRUE(stage.ok()) << stage.status();
          EXPECT_EQ(stage_count[r], 1) << p << "x" << d << " rank " << r;
          EXPECT_EQ(stage->group.index, w);
          EXPECT_EQ(stage->rank_in_group, q);
          EXPECT_EQ(stage->group.members[q], r);
          EXPECT_EQ(stage->group.creator(), w);
          EXPECT_EQ(static_cast<int>(stage->group.members.size()), d);
        } else {
          EXPECT_EQ(stage.status().code(), absl::StatusCode::kNotFound);
          EXPECT_EQ(stage_count[r], 0);
        }
      }
    }
  }
}

TEST(NcclGroupsTest, RejectsBadShapesAndRanks) {
  EXPECT_EQ(NcclGroupsOf(0, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclGroupsOf(2, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclGroupsOf(64, 65).status().code(), absl::StatusCode::kInvalidArgument);  // 4160
  EXPECT_TRUE(NcclGroupsOf(64, 64).ok());                                               // 4096
  EXPECT_EQ(StageGroupOf(4, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PipelineGroupOf(-1, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain
