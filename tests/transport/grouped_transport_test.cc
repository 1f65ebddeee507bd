// GroupedTransport (worker/transport/grouped_transport.h): job ranks routed to the pipeline
// group of the worker's replica or the stage group of its pipeline rank, in those groups' own
// ranks; anything else refused by name. The groups here are in-process fakes standing in for
// NCCL communicators; tests/runtime/data_parallel_test.cc trains through it bitwise.
#include "worker/transport/grouped_transport.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/transport/fake_transport.h"
#include "worker/transport/replica_view_transport.h"

namespace pipetrain::worker {
namespace {

using ::testing::HasSubstr;

absl::Time InFiveSeconds() { return absl::Now() + absl::Seconds(5); }

Message Tensor(const MessageKey& key, float value) {
  return Message{key, {1, 2}, {value, value + 1}};
}

// A non-owning handle on a hub's endpoint (the grouped transport owns its groups).
std::unique_ptr<Transport> Handle(FakeTransportHub& hub, int rank) {
  return std::make_unique<ReplicaViewTransport>(hub.endpoint(rank), 0);
}

// d = 3 replicas of a p = 2 pipeline; this worker is replica 1's pipeline rank 0 (job rank 2).
class GroupedTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = GroupedTransport::Create(1, 3, 0, 2, Handle(pipeline_, 0), Handle(stage_, 1));
    ASSERT_TRUE(t.ok()) << t.status();
    grouped_ = *std::move(t);
  }
  FakeTransportHub pipeline_{2};  // replica 1's ranks: job ranks 2, 3
  FakeTransportHub stage_{3};     // pipeline rank 0 of replicas 0, 1, 2: job ranks 0, 2, 4
  std::unique_ptr<GroupedTransport> grouped_;
};

TEST_F(GroupedTransportTest, RoutesJobRanksToTheirGroupInGroupRanks) {
  EXPECT_EQ(grouped_->rank(), 2);
  const MessageKey act{4, 0, 1, TensorRole::kActivation};
  const MessageKey sum{4, 0, 0, TensorRole::kReplicaGradient};
  // Job rank 3 is this replica's pipeline rank 1.
  ASSERT_TRUE(grouped_->Send(3, Tensor(act, 1)).ok());
  auto got = pipeline_.endpoint(1)->Recv(0, act, InFiveSeconds());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, (std::vector<float>{1, 2}));
  // Job ranks 0 and 4 are pipeline rank 0 of replicas 0 and 2: the stage group's ranks 0, 2.
  ASSERT_TRUE(grouped_->Send(0, Tensor(sum, 10)).ok());
  ASSERT_TRUE(grouped_->Send(4, Tensor(sum, 20)).ok());
  got = stage_.endpoint(0)->Recv(1, sum, InFiveSeconds());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, (std::vector<float>{10, 11}));
  got = stage_.endpoint(2)->Recv(1, sum, InFiveSeconds());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, (std::vector<float>{20, 21}));
  // And back: a receive by job rank takes the message from that group's rank.
  ASSERT_TRUE(stage_.endpoint(2)->Send(1, Tensor(sum, 30)).ok());
  ASSERT_TRUE(pipeline_.endpoint(1)->Send(0, Tensor(act, 40)).ok());
  got = grouped_->Recv(4, sum, InFiveSeconds());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, (std::vector<float>{30, 31}));
  got = grouped_->Recv(3, act, InFiveSeconds());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, (std::vector<float>{40, 41}));
  // Stats add both groups up: three payloads of 8 bytes sent, two received.
  const TransportStats stats = grouped_->stats();
  EXPECT_EQ(stats.sent_messages, 3);
  EXPECT_EQ(stats.sent_bytes, 24);
  EXPECT_EQ(stats.received_messages, 2);
  EXPECT_EQ(stats.received_bytes, 16);
}

TEST_F(GroupedTransportTest, RefusesRanksOutsideBothGroupsNamingThem) {
  const MessageKey key{0, 0, 0, TensorRole::kActivation};
  // Job rank 1 is replica 0's pipeline rank 1: no group links it with replica 1's rank 0.
  absl::Status status = grouped_->Send(1, Tensor(key, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("rank 2 (replica 1, pipeline rank 0) shares no group with rank 1 "
                        "(replica 0, pipeline rank 1)"));
  EXPECT_EQ(grouped_->Recv(5, key, InFiveSeconds()).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (int peer : {-1, 2, 6}) {
    status = grouped_->Send(peer, Tensor(key, 1));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << peer;
    EXPECT_THAT(std::string(status.message()), HasSubstr("is not another rank of the job's 6"));
  }
}

TEST_F(GroupedTransportTest, AbortReachesBothGroups) {
  grouped_->Abort(absl::CancelledError("job cancelled"));
  const MessageKey key{0, 0, 0, TensorRole::kActivation};
  EXPECT_EQ(grouped_->Recv(3, key, InFiveSeconds()).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(grouped_->Recv(0, key, InFiveSeconds()).status().code(), absl::StatusCode::kCancelled);
}

TEST(GroupedTransportCreateTest, ChecksThePlaceAgainstTheGroups) {
  FakeTransportHub pipeline(2), stage(2);
  // The pipeline group's rank must be the pipeline rank, the stage group's the replica.
  auto t = GroupedTransport::Create(0, 2, 1, 2, Handle(pipeline, 0), Handle(stage, 0));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("the pipeline group's rank is 0, this worker is pipeline rank 1"));
  t = GroupedTransport::Create(0, 2, 1, 2, Handle(pipeline, 1), Handle(stage, 1));
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("the stage group's rank is 1, this worker is replica 0"));
  t = GroupedTransport::Create(2, 2, 0, 2, Handle(pipeline, 0), Handle(stage, 0));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("is outside the job"));
  t = GroupedTransport::Create(0, 2, 0, 1, nullptr, nullptr);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("neither a pipeline nor a stage"));
  // p = 1: replicas only, no pipeline group; the stage group carries everything.
  t = GroupedTransport::Create(1, 2, 0, 1, nullptr, Handle(stage, 1));
  ASSERT_TRUE(t.ok()) << t.status();
  const MessageKey key{0, 0, 0, TensorRole::kReplicaLoss};
  ASSERT_TRUE((*t)->Send(0, Tensor(key, 7)).ok());
  EXPECT_TRUE(stage.endpoint(0)->Recv(1, key, InFiveSeconds()).ok());
}

}  // namespace
}  // namespace pipetrain::worker
