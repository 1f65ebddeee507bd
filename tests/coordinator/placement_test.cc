// Placement of a job's ranks on its workers: each pipeline on as few zones and hosts as the
// registered workers allow, neighbours next to each other; the replicas span the distance.
#include "coordinator/placement.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pipetrain::coordinator {
namespace {

// The (zone, host) of every rank under the placement.
std::vector<std::string> Where(const std::vector<WorkerLocation>& workers, int p) {
  const std::vector<int> order = PlaceRanks(workers, p);
  std::vector<std::string> out;
  std::set<int> seen;
  for (int i : order) {
    EXPECT_TRUE(seen.insert(i).second) << "worker " << i << " placed twice";
    out.push_back(workers[i].zone + "/" + workers[i].host);
  }
  EXPECT_EQ(seen.size(), workers.size());
  return out;
}

TEST(PlacementTest, EachPipelineOnOneHostWhenTheHostsAllowIt) {
  // Registered interleaved across two hosts (as workers often come up): a, b, a, b.
  const std::vector<WorkerLocation> workers = {{"", "a"}, {"", "b"}, {"", "a"}, {"", "b"}};
  // d = 2, p = 2: each replica's two ranks share a host.
  EXPECT_EQ(Where(workers, 2), (std::vector<std::string>{"/a", "/a", "/b", "/b"}));
  EXPECT_EQ(PlaceRanks(workers, 2), (std::vector<int>{0, 2, 1, 3}));
  // d = 1, p = 4: the one pipeline crosses hosts once, not at every rank.
  EXPECT_EQ(Where(workers, 4), (std::vector<std::string>{"/a", "/a", "/b", "/b"}));
  // d = 4, p = 1: nothing to keep together; registry order.
  EXPECT_EQ(PlaceRanks(workers, 1), (std::vector<int>{0, 1, 2, 3}));
}

TEST(PlacementTest, PipelinesStayInAZoneAndBigHostsStayWhole) {
  // Zone x: hosts a (2 workers) and b (1); zone y: hosts c (3) and d (2). d = 2, p = 4.
  const std::vector<WorkerLocation> workers = {{"y", "c"}, {"x", "a"}, {"y", "d"}, {"x", "b"},
                                               {"y", "c"}, {"x", "a"}, {"y", "d"}, {"y", "c"}};
  const std::vector<std::string> where = Where(workers, 4);
  // No host has 4: replica 0 takes the zone with the fewest workers that are enough (y has 5,
  // x only 3), fullest host first; replica 1 is left with the rest and spans both zones.
  EXPECT_EQ(std::vector<std::string>(where.begin(), where.begin() + 4),
            (std::vector<std::string>{"y/c", "y/c", "y/c", "y/d"}));
  EXPECT_EQ(std::vector<std::string>(where.begin() + 4, where.end()),
            (std::vector<std::string>{"x/a", "x/a", "x/b", "y/d"}));
  // d = 4, p = 2: hosts with exactly 2 free first (a, then d), then 2 of c's 3; the last pair
  // is what is left (x/b and y/c: 3 and 5 workers per zone cannot all pair within a zone).
  EXPECT_EQ(Where(workers, 2),
            (std::vector<std::string>{"x/a", "x/a", "y/d", "y/d", "y/c", "y/c", "x/b", "y/c"}));
}

TEST(PlacementTest, UnknownHostsKeepTheRegistryOrderAndBadSizesAreTheIdentity) {
  const std::vector<WorkerLocation> unknown(4);
  EXPECT_EQ(PlaceRanks(unknown, 2), (std::vector<int>{0, 1, 2, 3}));
  const std::vector<WorkerLocation> three = {{"", "a"}, {"", "b"}, {"", "a"}};
  EXPECT_EQ(PlaceRanks(three, 2), (std::vector<int>{0, 1, 2}));  // 2 does not divide 3
  EXPECT_EQ(PlaceRanks(three, 0), (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace pipetrain::coordinator
