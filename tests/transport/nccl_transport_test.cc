// NcclTransport (CUDA build only). The unique-id serialization, the group helper and the idle
// backoff schedule run everywhere (no device needed); the bounded-join test needs one CUDA
// device; the two-rank tests need two (NCCL refuses two ranks of one communicator on one GPU).
// Device tests skip with a reason otherwise.
#include "worker/transport/nccl_transport.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>

namespace pipetrain::worker {
namespace {

TEST(NcclUniqueIdTest, SerializationRoundTrips) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id.internal); ++i) id.internal[i] = static_cast<char>(i * 7 + 1);
  const std::string bytes = SerializeNcclUniqueId(id);
  ASSERT_EQ(bytes.size(), sizeof(id.internal));
  auto parsed = ParseNcclUniqueId(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::memcmp(parsed->internal, id.internal, sizeof(id.internal)), 0);
}

TEST(NcclUniqueIdTest, WrongLengthIsInvalidArgument) {
  auto parsed = ParseNcclUniqueId("too short");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NcclUniqueIdTest, CreateRejectsBadOptionsBeforeTouchingNccl) {
  NcclTransportOptions options;
  options.rank = 0;
  options.world_size = 2;
  options.peers = {1};
  options.unique_id = "short";
  auto t = NcclTransport::Create(options);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  options.unique_id = std::string(NCCL_UNIQUE_ID_BYTES, '\0');
  options.peers = {0};  // itself
  EXPECT_EQ(NcclTransport::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- The group helper: a failing call inside a group still ends the group ----

int group_starts = 0;
int group_ends = 0;
ncclResult_t FakeGroupStart() {
  ++group_starts;
  return ncclSuccess;
}
ncclResult_t FakeGroupEnd() {
  ++group_ends;
  return ncclSuccess;
}
ncclResult_t FailingGroupEnd() {
  ++group_ends;
  return ncclSystemError;
}

TEST(NcclGroupTest, AFailingCallInsideTheGroupStillEndsIt) {
  group_starts = group_ends = 0;
  int calls = 0;
  const absl::Status status = RunNcclGroup(
      [&] {
        ++calls;
        return absl::InvalidArgumentError("ncclSend(...) failed: invalid argument");
      },
      FakeGroupStart, FakeGroupEnd);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(group_starts, 1);
  EXPECT_EQ(group_ends, 1) << "the group was left open";
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "the body's error wins";
}

TEST(NcclGroupTest, TheEndsErrorIsReportedWhenTheBodySucceeds) {
  group_starts = group_ends = 0;
  const absl::Status status =
      RunNcclGroup([] { return absl::OkStatus(); }, FakeGroupStart, FailingGroupEnd);
  EXPECT_EQ(group_ends, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;  // ncclSystemError
  EXPECT_TRUE(RunNcclGroup([] { return absl::OkStatus(); }, FakeGroupStart, FakeGroupEnd).ok());
}

// ---- Idle backoff schedule ----

TEST(NcclIdleBackoffTest, DoublesFromTheMinimumToTheCapAndResets) {
  IdleBackoff backoff(absl::Microseconds(50), absl::Milliseconds(2));
  std::vector<absl::Duration> got;
  for (int i = 0; i < 8; ++i) got.push_back(backoff.Next());
  const std::vector<absl::Duration> want = {absl::Microseconds(50),  absl::Microseconds(100),
                                            absl::Microseconds(200), absl::Microseconds(400),
                                            absl::Microseconds(800), absl::Microseconds(1600),
                                            absl::Milliseconds(2),   absl::Milliseconds(2)};
  EXPECT_EQ(got, want);
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), absl::Microseconds(50));
  // A cap below the minimum is the minimum (never sleeps less than asked).
  IdleBackoff flat(absl::Microseconds(300), absl::Microseconds(100));
  EXPECT_EQ(flat.Next(), absl::Microseconds(300));
  EXPECT_EQ(flat.Next(), absl::Microseconds(300));
}

TEST(NcclIdleBackoffTest, ADefaultIdleLinkRoundsAtMostEveryFewMilliseconds) {
  // What the defaults promise: after 10 idle rounds the thread sleeps the cap, a few ms.
  NcclTransportOptions defaults;
  IdleBackoff backoff(defaults.idle_sleep, defaults.idle_sleep_max);
  absl::Duration slept;
  for (int i = 0; i < 1000; ++i) slept += backoff.Next();
  EXPECT_GE(defaults.idle_sleep_max, absl::Milliseconds(1));
  EXPECT_LE(defaults.idle_sleep_max, absl::Milliseconds(5));
  EXPECT_GT(slept, absl::Milliseconds(1900)) << "1000 idle rounds took " << slept;
}

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// Two ranks of one communicator as two threads of this process, on devices 0 and 1. The threads
// leave their current device alone (device 0): Create must select options.device itself.
std::vector<std::unique_ptr<NcclTransport>> MakePair(
    absl::Duration peer_timeout = absl::Seconds(20)) {
  auto id = NewNcclUniqueId();
  EXPECT_TRUE(id.ok()) << id.status();
  std::vector<std::unique_ptr<NcclTransport>> out(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      NcclTransportOptions o;
      o.rank = r;
      o.world_size = 2;
      o.peers = {1 - r};
      o.device = r;
      o.unique_id = *id;
      o.peer_timeout = peer_timeout;
      o.connect_timeout = absl::Seconds(30);
      int before = -1;
      cudaGetDevice(&before);
      auto t = NcclTransport::Create(o);
      EXPECT_TRUE(t.ok()) << t.status();
      int after = -1;
      cudaGetDevice(&after);
      EXPECT_EQ(after, before) << "Create changed the calling thread's device";
      if (t.ok()) out[r] = std::move(*t);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

Message MakeMessage(int step, int stage, int mb, TensorRole role, int64_t rows, int64_t cols) {
  Message m;
  m.key = MessageKey{step, stage, mb, role};
  m.shape = {rows, cols};
  m.data.resize(rows * cols);
  std::iota(m.data.begin(), m.data.end(), static_cast<float>(stage * 1000 + mb));
  return m;
}

#define SKIP_UNLESS_TWO_DEVICES()                                                          \
  do {                                                                                     \
    const int devices = DeviceCount();                                                     \
    if (devices == 0) GTEST_SKIP() << "no CUDA device";                                    \
    if (devices < 2)                                                                       \
      GTEST_SKIP() << "needs two CUDA devices (NCCL: one rank per GPU), have " << devices; \
  } while (0)

TEST(NcclTransportTest, SendRecvBothDirectionsOutOfOrderKeys) {
  SKIP_UNLESS_TWO_DEVICES();
  auto pair = MakePair();
  ASSERT_TRUE(pair[0] && pair[1]);
  // Both sides send at once (paired in one group per round: no deadlock), several keys.
  for (int mb = 0; mb < 4; ++mb) {
    ASSERT_TRUE(pair[0]->Send(1, MakeMessage(0, 0, mb, TensorRole::kActivation, 64, 256)).ok());
    ASSERT_TRUE(pair[1]->Send(0, MakeMessage(0, 1, mb, TensorRole::kGradient, 32, 8)).ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (int mb = 3; mb >= 0; --mb) {  // by key, not arrival order
    auto a = pair[1]->Recv(0, MessageKey{0, 0, mb, TensorRole::kActivation}, deadline);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->data, MakeMessage(0, 0, mb, TensorRole::kActivation, 64, 256).data);
    auto g = pair[0]->Recv(1, MessageKey{0, 1, mb, TensorRole::kGradient}, deadline);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->shape, (std::vector<int64_t>{32, 8}));
  }
  EXPECT_TRUE(pair[0]->Flush(deadline).ok());
  EXPECT_EQ(pair[0]->stats().sent_messages, 4);
  EXPECT_EQ(pair[1]->stats().received_bytes, 4 * 64 * 256 * 4);
}

TEST(NcclTransportTest, RecvTimesOutAndAbortFailsPendingRecv) {
  SKIP_UNLESS_TWO_DEVICES();
  auto pair = MakePair();
  ASSERT_TRUE(pair[0] && pair[1]);
  auto r = pair[0]->Recv(1, MessageKey{5, 1, 0, TensorRole::kGradient},
                         absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    pair[0]->Abort(absl::CancelledError("job aborted"));
  });
  r = pair[0]->Recv(1, MessageKey{5, 1, 0, TensorRole::kGradient}, absl::Now() + absl::Seconds(20));
  aborter.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(pair[0]->Send(1, MakeMessage(0, 0, 0, TensorRole::kActivation, 1, 1)).ok());
}

TEST(NcclTransportTest, JoiningIsBoundedWhenAPeerNeverComes) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  // Rank 0 of a world of 2 whose rank 1 never calls Create: a blocking ncclCommInitRank waited
  // forever; now Create gives up after connect_timeout and names the missing peer.
  auto id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  NcclTransportOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.peers = {1};
  o.unique_id = *id;
  o.connect_timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  auto t = NcclTransport::Create(o);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded) << t.status();
  EXPECT_NE(t.status().message().find("peer rank(s) 1"), std::string::npos) << t.status();
  EXPECT_LT(took, absl::Seconds(15)) << "the join was not bounded by connect_timeout";
  EXPECT_GE(took, absl::Seconds(2));
}

TEST(NcclTransportTest, ADeadPeerFailsRecvWithinThePeerTimeout) {
  SKIP_UNLESS_TWO_DEVICES();
  auto pair = MakePair(/*peer_timeout=*/absl::Seconds(2));
  ASSERT_TRUE(pair[0] && pair[1]);
  // Rank 1 dies: its communicator is aborted and it takes part in no more rounds.
  pair[1]->Abort(absl::CancelledError("rank 1 died"));
  absl::SleepFor(absl::Milliseconds(200));
  // Rank 0's next round waits on an NCCL kernel its peer never matches. With pageable staging
  // the transport thread blocked in a copy behind that kernel and never looked at the clock;
  // now it polls, gives up after peer_timeout and fails the link.
  ASSERT_TRUE(pair[0]->Send(1, MakeMessage(0, 0, 0, TensorRole::kActivation, 64, 64)).ok());
  const absl::Time start = absl::Now();
  auto r =
      pair[0]->Recv(1, MessageKey{0, 1, 0, TensorRole::kGradient}, absl::Now() + absl::Seconds(60));
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << "Recv ran into its own deadline: the dead peer was never detected: " << r.status();
  EXPECT_LT(took, absl::Seconds(15)) << r.status();
  EXPECT_FALSE(pair[0]->Send(1, MakeMessage(0, 0, 1, TensorRole::kActivation, 1, 1)).ok());
}

TEST(NcclTransportTest, AnIdleLinkBacksOffAndStillDeliversPromptly) {
  SKIP_UNLESS_TWO_DEVICES();
  auto pair = MakePair();
  ASSERT_TRUE(pair[0] && pair[1]);
  const int64_t before = pair[0]->rounds();
  absl::SleepFor(absl::Milliseconds(500));
  const int64_t idle_rounds = pair[0]->rounds() - before;
  // Every 50 us this was ~5000 rounds (an NCCL kernel always in flight); backing off to 2 ms
  // it is about 250.
  EXPECT_LT(idle_rounds, 600) << "rounds in 500 ms of idleness";
  const absl::Time start = absl::Now();
  ASSERT_TRUE(pair[0]->Send(1, MakeMessage(0, 0, 7, TensorRole::kActivation, 8, 8)).ok());
  auto m = pair[1]->Recv(0, MessageKey{0, 0, 7, TensorRole::kActivation},
                         absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(200)) << "the first message after idling";
}

}  // namespace
}  // namespace pipetrain::worker
