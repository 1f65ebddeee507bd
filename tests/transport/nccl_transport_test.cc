// NcclTransport (CUDA build only). The unique-id serialization runs everywhere; the two-rank
// tests need two CUDA devices (NCCL refuses two ranks of one communicator on one GPU) and skip
// with a reason otherwise.
#include "worker/transport/nccl_transport.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
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

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// Two ranks of one communicator as two threads of this process, on devices 0 and 1.
std::vector<std::unique_ptr<NcclTransport>> MakePair() {
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
      o.peer_timeout = absl::Seconds(20);
      auto t = NcclTransport::Create(o);
      EXPECT_TRUE(t.ok()) << t.status();
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

}  // namespace
}  // namespace pipetrain::worker
