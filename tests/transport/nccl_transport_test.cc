// NcclTransport (CUDA build only). The unique-id serialization, the group helper and the idle
// backoff schedule run everywhere (no device needed); the device tests need one CUDA device and
// skip with a reason otherwise.
//
// The two-rank tests put rank 1 in a child process (this binary, run with --nccl-peer ROLE),
// which plays its part of the test and exits 0 when every check of its side held. NCCL refuses
// two ranks of one communicator on one device of one host, so with one GPU the child takes a
// host id of its own (NCCL_HOSTID) and NCCL links the two ranks over its socket transport, as
// between machines; with two GPUs the child uses device 1 and NCCL's same-host paths.
#include "worker/transport/nccl_transport.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

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

Message MakeMessage(int step, int stage, int mb, TensorRole role, int64_t rows, int64_t cols) {
  Message m;
  m.key = MessageKey{step, stage, mb, role};
  m.shape = {rows, cols};
  m.data.resize(rows * cols);
  std::iota(m.data.begin(), m.data.end(), static_cast<float>(stage * 1000 + mb));
  return m;
}

// ---- Two ranks: this process is rank 0 on device 0, a child process rank 1 ----

// The message that tells a lingering peer it may go.
const MessageKey kDone{0, 0, 99, TensorRole::kStepStatus};

// Rank 0's transport and the child process of rank 1.
struct CrossProcessPair {
  std::unique_ptr<NcclTransport> local;
  subprocess::Process peer;
};

// Starts rank 1 as a child playing `role` (RunPeer below), then joins the communicator as rank 0.
CrossProcessPair MakePair(const std::string& role,
                          absl::Duration peer_timeout = absl::Seconds(20)) {
  CrossProcessPair pair;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return pair;
  const bool one_gpu = DeviceCount() < 2;
  const std::string dir = subprocess::TempDir();
  pair.peer = subprocess::Spawn({"/proc/self/exe", "--nccl-peer", role, absl::BytesToHexString(*id),
                                 absl::StrCat(absl::ToInt64Milliseconds(peer_timeout)),
                                 one_gpu ? "0" : "1", one_gpu ? "pipetrain-nccl-test-peer" : ""},
                                dir + "/peer");
  NcclTransportOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.peers = {1};
  o.device = 0;
  o.unique_id = *id;
  o.peer_timeout = peer_timeout;
  o.connect_timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<NcclTransport>> t = NcclTransport::Create(o);
  EXPECT_TRUE(t.ok()) << t.status()
                      << "; the peer's log: " << subprocess::ReadFile(pair.peer.stderr_path);
  if (t.ok()) pair.local = std::move(*t);
  return pair;
}

// Rank 1's exit: 0 when its side held (its log says what did not otherwise).
std::optional<int> PeerExit(const CrossProcessPair& pair, absl::Duration timeout) {
  return subprocess::WaitFor(pair.peer, timeout);
}

#define SKIP_WITHOUT_A_DEVICE()                               \
  do {                                                        \
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

TEST(NcclTransportTest, SendRecvBothDirectionsOutOfOrderKeys) {
  SKIP_WITHOUT_A_DEVICE();
  CrossProcessPair pair = MakePair("exchange");
  ASSERT_TRUE(pair.local);
  // Both sides send at once (paired in one group per round: no deadlock), several keys; the
  // peer sends gradients and takes the activations in reverse order.
  for (int mb = 0; mb < 4; ++mb) {
    ASSERT_TRUE(pair.local->Send(1, MakeMessage(0, 0, mb, TensorRole::kActivation, 64, 256)).ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (int mb = 3; mb >= 0; --mb) {  // by key, not arrival order
    auto g = pair.local->Recv(1, MessageKey{0, 1, mb, TensorRole::kGradient}, deadline);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->shape, (std::vector<int64_t>{32, 8}));
    EXPECT_EQ(g->data, MakeMessage(0, 1, mb, TensorRole::kGradient, 32, 8).data);
  }
  EXPECT_TRUE(pair.local->Flush(deadline).ok());
  EXPECT_EQ(pair.local->stats().sent_messages, 4);
  EXPECT_EQ(pair.local->stats().received_bytes, 4 * 32 * 8 * 4);
  EXPECT_EQ(PeerExit(pair, absl::Seconds(60)), 0) << subprocess::ReadFile(pair.peer.stderr_path);
}

TEST(NcclTransportTest, RecvTimesOutAndAbortFailsPendingRecv) {
  SKIP_WITHOUT_A_DEVICE();
  CrossProcessPair pair = MakePair("linger");
  ASSERT_TRUE(pair.local);
  auto r = pair.local->Recv(1, MessageKey{5, 1, 0, TensorRole::kGradient},
                            absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    pair.local->Abort(absl::CancelledError("job aborted"));
  });
  r = pair.local->Recv(1, MessageKey{5, 1, 0, TensorRole::kGradient},
                       absl::Now() + absl::Seconds(20));
  aborter.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(pair.local->Send(1, MakeMessage(0, 0, 0, TensorRole::kActivation, 1, 1)).ok());
  subprocess::Kill(pair.peer, SIGKILL);
  PeerExit(pair, absl::Seconds(10));
}

TEST(NcclTransportTest, JoiningIsBoundedWhenAPeerNeverComes) {
  SKIP_WITHOUT_A_DEVICE();
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

TEST(NcclTransportTest, ADeadPeerFailsTheLinkWithinThePeerTimeout) {
  SKIP_WITHOUT_A_DEVICE();
  CrossProcessPair pair = MakePair("linger", /*peer_timeout=*/absl::Seconds(2));
  ASSERT_TRUE(pair.local);
  // Rank 1's process dies (kill -9): it takes part in no more rounds. Either NCCL reports the
  // lost connection at once (over sockets it does: the next Send already fails), or rank 0's
  // next round waits on a kernel its peer never matches; with pageable staging the transport
  // thread blocked in a copy behind that kernel and never looked at the clock; now it polls and
  // gives up after peer_timeout. Either way the link fails well before the Recv's own deadline.
  const absl::Time start = absl::Now();
  subprocess::Kill(pair.peer, SIGKILL);
  PeerExit(pair, absl::Seconds(10));
  absl::Status status = pair.local->Send(1, MakeMessage(0, 0, 0, TensorRole::kActivation, 64, 64));
  if (status.ok()) {
    status =
        pair.local
            ->Recv(1, MessageKey{0, 1, 0, TensorRole::kGradient}, absl::Now() + absl::Seconds(60))
            .status();
  }
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.code(), absl::StatusCode::kDeadlineExceeded)
      << "Recv ran into its own deadline: the dead peer was never detected: " << status;
  EXPECT_LT(took, absl::Seconds(15)) << status;
  EXPECT_FALSE(pair.local->Send(1, MakeMessage(0, 0, 1, TensorRole::kActivation, 1, 1)).ok());
  std::printf("dead peer: %s after %s\n", status.ToString().c_str(),
              absl::FormatDuration(took).c_str());
}

TEST(NcclTransportTest, AnIdleLinkBacksOffAndStillDeliversPromptly) {
  SKIP_WITHOUT_A_DEVICE();
  CrossProcessPair pair = MakePair("echo");
  ASSERT_TRUE(pair.local);
  const int64_t before = pair.local->rounds();
  absl::SleepFor(absl::Milliseconds(500));
  const int64_t idle_rounds = pair.local->rounds() - before;
  // Every 50 us this was ~5000 rounds (an NCCL kernel always in flight); backing off to 2 ms
  // it is about 250.
  EXPECT_LT(idle_rounds, 600) << "rounds in 500 ms of idleness";
  // The first message after idling, and the peer's answer: both links were idle.
  const absl::Time start = absl::Now();
  ASSERT_TRUE(pair.local->Send(1, MakeMessage(0, 0, 7, TensorRole::kActivation, 8, 8)).ok());
  auto m = pair.local->Recv(1, MessageKey{0, 1, 7, TensorRole::kGradient},
                            absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(400)) << "a round trip after idling";
  EXPECT_EQ(PeerExit(pair, absl::Seconds(60)), 0) << subprocess::ReadFile(pair.peer.stderr_path);
}

// Rank 1 of MakePair, in the child: argv = --nccl-peer ROLE ID_HEX PEER_TIMEOUT_MS DEVICE
// HOST_ID. Roles: "exchange" (SendRecvBothDirectionsOutOfOrderKeys' other side), "echo" (answers
// activation 7 with gradient 7), "linger" (stays joined until the link fails or kDone comes).
int RunPeer(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: --nccl-peer ROLE ID_HEX PEER_TIMEOUT_MS DEVICE HOST_ID\n");
    return 2;
  }
  const std::string role = argv[2];
  int64_t timeout_ms = 0;
  int device = 0;
  if (!absl::SimpleAtoi(argv[4], &timeout_ms) || !absl::SimpleAtoi(argv[5], &device)) return 2;
  // Before NCCL reads it (once per process).
  if (argv[6][0] != '\0') setenv("NCCL_HOSTID", argv[6], 1);
  NcclTransportOptions o;
  o.rank = 1;
  o.world_size = 2;
  o.peers = {0};
  o.device = device;
  o.unique_id = absl::HexStringToBytes(argv[3]);
  o.peer_timeout = absl::Milliseconds(timeout_ms);
  o.connect_timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<NcclTransport>> joined = NcclTransport::Create(o);
  if (!joined.ok()) {
    std::fprintf(stderr, "rank 1 could not join: %s\n", joined.status().ToString().c_str());
    return 3;
  }
  NcclTransport& t = **joined;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "rank 1: %s\n", what.c_str());
    return 1;
  };
  if (role == "exchange") {
    for (int mb = 0; mb < 4; ++mb) {
      if (!t.Send(0, MakeMessage(0, 1, mb, TensorRole::kGradient, 32, 8)).ok()) {
        return fail("send failed");
      }
    }
    for (int mb = 3; mb >= 0; --mb) {
      auto a = t.Recv(0, MessageKey{0, 0, mb, TensorRole::kActivation}, deadline);
      if (!a.ok()) return fail(a.status().ToString());
      if (a->data != MakeMessage(0, 0, mb, TensorRole::kActivation, 64, 256).data) {
        return fail(absl::StrCat("activation ", mb, " arrived changed"));
      }
    }
    if (!t.Flush(deadline).ok()) return fail("flush failed");
    if (t.stats().received_bytes != 4 * 64 * 256 * 4) return fail("received bytes");
    return 0;
  }
  if (role == "echo") {
    auto a = t.Recv(0, MessageKey{0, 0, 7, TensorRole::kActivation}, deadline);
    if (!a.ok()) return fail(a.status().ToString());
    if (!t.Send(0, MakeMessage(0, 1, 7, TensorRole::kGradient, 1, 1)).ok()) {
      return fail("send failed");
    }
    return t.Flush(deadline).ok() ? 0 : fail("flush failed");
  }
  if (role == "linger") {
    auto done = t.Recv(0, kDone, absl::Now() + absl::Seconds(120));
    return done.ok() ? 0 : fail(done.status().ToString());
  }
  return fail("unknown role " + role);
}

}  // namespace
}  // namespace pipetrain::worker

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--nccl-peer") {
    return pipetrain::worker::RunPeer(argc, argv);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
