// Transport contract tests, run against both the TCP transport (two endpoints in one process
// over loopback) and the fake hub: delivery by key, order independence, failure on a lost peer,
// corruption and mis-sized frames detected, bounded waits.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/transport/fake_transport.h"
#include "worker/transport/frame_header.h"
#include "worker/transport/tcp_transport.h"

namespace pipetrain::worker {
namespace {

Message MakeMessage(MessageKey key, int64_t rows, int64_t cols, float base) {
  Message m;
  m.key = key;
  m.shape = {rows, cols};
  m.data.resize(static_cast<size_t>(rows * cols));
  std::iota(m.data.begin(), m.data.end(), base);
  return m;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// Two (or more) TCP endpoints on 127.0.0.1, fully connected.
std::vector<std::unique_ptr<TcpTransport>> ConnectRing(int n) {
  std::vector<std::unique_ptr<TcpListener>> listeners;
  std::vector<std::string> addresses;
  for (int r = 0; r < n; ++r) {
    auto l = TcpListener::Bind("127.0.0.1", 0);
    EXPECT_TRUE(l.ok()) << l.status();
    addresses.push_back(absl::StrCat("127.0.0.1:", (*l)->port()));
    listeners.push_back(std::move(*l));
  }
  std::vector<std::future<absl::StatusOr<std::unique_ptr<TcpTransport>>>> futures;
  for (int r = 0; r < n; ++r) {
    TcpTransportOptions options;
    options.rank = r;
    options.addresses = addresses;
    for (int q = 0; q < n; ++q) {
      if (q != r) options.peers.push_back(q);
    }
    options.connect_timeout = absl::Seconds(10);
    futures.push_back(
        std::async(std::launch::async, [options, l = std::move(listeners[r])]() mutable {
          return TcpTransport::Connect(options, std::move(l));
        }));
  }
  std::vector<std::unique_ptr<TcpTransport>> out;
  for (auto& f : futures) {
    auto t = f.get();
    EXPECT_TRUE(t.ok()) << t.status();
    out.push_back(std::move(*t));
  }
  return out;
}

// A rank listens where its peers dial it: an IPv4 literal as it is; a DNS name (a pod's name in
// a JobSet) on every interface, since the name is for the peers; localhost on the loopback.
TEST(TcpTransport, ListenHostForAPeerAddress) {
  EXPECT_EQ(ListenHostFor("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(ListenHostFor("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(ListenHostFor("localhost"), "127.0.0.1");
  EXPECT_EQ(ListenHostFor("pipetrain-run-workers-0-1.pipetrain-run"), "0.0.0.0");
  auto listener = TcpListener::Bind(ListenHostFor("some-pod.example"), 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  EXPECT_GT((*listener)->port(), 0);
}

TEST(TcpTransport, DeliversByKeyInAnyOrder) {
  auto t = ConnectRing(3);
  MessageKey a{0, 1, 0, TensorRole::kActivation};
  MessageKey b{0, 1, 1, TensorRole::kActivation};
  MessageKey g{0, 2, 0, TensorRole::kGradient};
  ASSERT_TRUE(t[0]->Send(1, MakeMessage(a, 3, 5, 1.0f)).ok());
  ASSERT_TRUE(t[0]->Send(1, MakeMessage(b, 2, 2, 100.0f)).ok());
  ASSERT_TRUE(t[2]->Send(1, MakeMessage(g, 4, 1, -7.0f)).ok());
  // Ask in the opposite order of sending.
  auto rb = t[1]->Recv(0, b, Soon());
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(rb->data, (std::vector<float>{100, 101, 102, 103}));
  auto ra = t[1]->Recv(0, a, Soon());
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->data.size(), 15u);
  EXPECT_EQ(ra->data[14], 15.0f);
  auto rg = t[1]->Recv(2, g, Soon());
  ASSERT_TRUE(rg.ok()) << rg.status();
  EXPECT_EQ(rg->data, (std::vector<float>{-7, -6, -5, -4}));
  ASSERT_TRUE(t[0]->Flush(Soon()).ok());
  EXPECT_EQ(t[0]->stats().sent_bytes, (15 + 4) * 4);
  EXPECT_EQ(t[1]->stats().received_bytes, (15 + 4 + 4) * 4);
  EXPECT_EQ(t[1]->stats().received_messages, 3);
}

TEST(TcpTransport, LargeTensorRoundTrip) {
  auto t = ConnectRing(2);
  MessageKey k{3, 0, 7, TensorRole::kActivation};
  Message m = MakeMessage(k, 1024, 4096, 0.5f);  // 16 MiB
  const std::vector<float> expected = m.data;
  ASSERT_TRUE(t[0]->Send(1, std::move(m)).ok());
  auto r = t[1]->Recv(0, k, Soon());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, expected);
}

TEST(TcpTransport, RecvTimesOutWithBoundedWait) {
  auto t = ConnectRing(2);
  const absl::Time start = absl::Now();
  auto r = t[1]->Recv(0, MessageKey{0, 0, 0, TensorRole::kActivation},
                      absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_NE(r.status().message().find("activation of stage 0 microbatch 0"), std::string::npos);
}

TEST(TcpTransport, PeerShutdownFailsPendingRecvPromptly) {
  auto t = ConnectRing(2);
  MessageKey k{0, 0, 0, TensorRole::kActivation};
  auto pending = std::async(std::launch::async, [&] { return t[1]->Recv(0, k, Soon()); });
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time killed = absl::Now();
  t[0].reset();  // rank 0 shuts down cleanly: drains, says goodbye, closes
  auto r = pending.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("rank 0 at 127.0.0.1:"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("finished its run"), std::string::npos) << r.status();
  EXPECT_LT(absl::Now() - killed, absl::Seconds(2));
  // Later calls fail at once too.
  EXPECT_FALSE(t[1]->Send(0, MakeMessage(k, 1, 1, 0)).ok());
}

// Rank 1 of session `tag`, listening on `listener` at `address`, accepting its rank 0 in the
// background.
std::future<absl::StatusOr<std::unique_ptr<TcpTransport>>> AcceptRankZero(
    std::unique_ptr<TcpListener> listener, const std::string& address, uint64_t tag,
    absl::Duration timeout) {
  return std::async(std::launch::async, [address, tag, timeout, l = std::move(listener)]() mutable {
    TcpTransportOptions o;
    o.rank = 1;
    o.addresses = {"127.0.0.1:1", address};
    o.peers = {0};
    o.session_tag = tag;
    o.connect_timeout = timeout;
    return TcpTransport::Connect(o, std::move(l));
  });
}

// Rank 0 of session 8 dialing `address` for rank 1 (a short connect timeout by default).
absl::StatusOr<std::unique_ptr<TcpTransport>> DialRankOne(
    const std::string& address, absl::Duration timeout = absl::Seconds(1)) {
  TcpTransportOptions o;
  o.rank = 0;
  o.addresses = {"127.0.0.1:1", address};
  o.peers = {1};
  o.session_tag = 8;
  o.connect_timeout = timeout;
  return TcpTransport::Connect(o, nullptr);
}

// Rank 1 as a real transport, and a raw socket that introduces itself as rank 0 (so a test can
// write arbitrary bytes, or vanish, as that peer).
void ConnectRawPeer(int* fd, std::unique_ptr<TcpTransport>* transport) {
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const int port = (*listener)->port();
  auto accept =
      AcceptRankZero(std::move(*listener), absl::StrCat("127.0.0.1:", port), 0, absl::Seconds(10));
  *fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::connect(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const uint32_t hello[4] = {0x4f4c4548, 0, 0, 0};  // "HELO", rank 0, session tag 0 (64 bits)
  ASSERT_EQ(::send(*fd, hello, sizeof(hello), 0), 16);
  auto connected = accept.get();
  ASSERT_TRUE(connected.ok()) << connected.status();
  *transport = std::move(*connected);
}

// A raw client that introduces itself as rank 0 and then vanishes without a goodbye.
TEST(TcpTransport, AbruptlyLostPeerIsReportedAsLost) {
  int fd = -1;
  std::unique_ptr<TcpTransport> transport;
  ASSERT_NO_FATAL_FAILURE(ConnectRawPeer(&fd, &transport));
  ::close(fd);  // gone, no goodbye
  auto r = transport->Recv(0, MessageKey{0, 0, 0, TensorRole::kActivation}, Soon());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("lost rank 0"), std::string::npos) << r.status();
}

TEST(TcpTransport, SendRejectsShapeDataMismatch) {
  auto t = ConnectRing(2);
  Message m = MakeMessage(MessageKey{0, 0, 0, TensorRole::kActivation}, 2, 3, 0);
  m.data.pop_back();
  EXPECT_EQ(t[0]->Send(1, std::move(m)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TcpTransport, MalformedFrameIsDetectedNotConsumed) {
  // A raw client pretends to be rank 0 and sends a frame whose payload size disagrees with its
  // shape; rank 1 must fail the link with DataLoss.
  int fd = -1;
  std::unique_ptr<TcpTransport> transport;
  ASSERT_NO_FATAL_FAILURE(ConnectRawPeer(&fd, &transport));
  FrameHeader header =
      MessageHeader(MakeMessage(MessageKey{0, 0, 0, TensorRole::kActivation}, 1, 10, 0));
  header.payload_bytes = 12;  // should be 40
  ASSERT_EQ(::send(fd, &header, sizeof(header), 0), 72);
  auto r = transport->Recv(0, MessageKey{0, 0, 0, TensorRole::kActivation}, Soon());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find("mis-sized"), std::string::npos) << r.status();
  ::close(fd);
}

// The one header both wire transports use: what a sender may announce and a receiver accepts.
TEST(FrameHeaderTest, SenderAndReceiverChecks) {
  const Message m = MakeMessage(MessageKey{3, 2, 5, TensorRole::kGradient}, 2, 3, 0);
  EXPECT_TRUE(CheckSendable(m, 1 << 20).ok());
  EXPECT_EQ(CheckSendable(m, 8).code(), absl::StatusCode::kInvalidArgument);  // 24 bytes
  Message five_dims = m;
  five_dims.shape = {1, 1, 2, 3, 1};
  EXPECT_EQ(CheckSendable(five_dims, 1 << 20).code(), absl::StatusCode::kInvalidArgument);

  const FrameHeader h = MessageHeader(m);
  EXPECT_TRUE(HasMessage(h));
  EXPECT_TRUE(CheckReceivedHeader(h, 1 << 20, "rank 1").ok());
  EXPECT_EQ(KeyOf(h), m.key);
  EXPECT_EQ(ShapeOf(h), m.shape);
  EXPECT_FALSE(HasMessage(EmptyHeader(/*bye=*/false)));
  EXPECT_TRUE(CheckReceivedHeader(EmptyHeader(/*bye=*/true), 1 << 20, "rank 1").ok());
  auto rejected = [](FrameHeader bad, const char* what) {
    const absl::Status s = CheckReceivedHeader(bad, 1 << 20, "rank 1");
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << what;
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s;
  };
  FrameHeader bad = h;
  bad.magic = 0x12345678;
  rejected(bad, "magic");
  bad = h;
  bad.role = 7;  // 1..6: activation, gradient, step status, tied embedding gradient, replica
                 // gradient sum, replica losses
  rejected(bad, "role");
  for (TensorRole role : {TensorRole::kStepStatus, TensorRole::kTiedGradient,
                          TensorRole::kReplicaGradient, TensorRole::kReplicaLoss}) {
    FrameHeader status = h;
    status.role = static_cast<uint8_t>(role);
    EXPECT_TRUE(CheckReceivedHeader(status, 1 << 20, "rank 1").ok());
  }
  bad = h;
  bad.ndim = 5;
  rejected(bad, "rank");
  bad = h;
  bad.shape[0] = -2;
  rejected(bad, "negative dimension");
  bad = h;
  bad.payload_bytes += 4;
  rejected(bad, "size");
  bad = h;
  bad.shape[0] = 1 << 20;  // consistent with its payload, but over the limit
  bad.payload_bytes = uint64_t{1 << 20} * 3 * sizeof(float);
  rejected(bad, "limit");
}

TEST(FakeTransport, DeliversAndDetectsCorruption) {
  FakeTransportHub hub(2);
  MessageKey k0{0, 0, 0, TensorRole::kActivation};
  MessageKey k1{0, 0, 1, TensorRole::kActivation};
  ASSERT_TRUE(hub.endpoint(0)->Send(1, MakeMessage(k0, 2, 2, 1)).ok());
  auto r0 = hub.endpoint(1)->Recv(0, k0, Soon());
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(r0->data, (std::vector<float>{1, 2, 3, 4}));
  hub.CorruptNext(k1);
  ASSERT_TRUE(hub.endpoint(0)->Send(1, MakeMessage(k1, 2, 2, 1)).ok());
  auto r1 = hub.endpoint(1)->Recv(0, k1, Soon());
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r1.status().message().find("checksum mismatch"), std::string::npos);
}

TEST(FakeTransport, DropLeadsToBoundedTimeoutAndKillFailsLinks) {
  FakeTransportHub hub(3);
  MessageKey k{1, 2, 3, TensorRole::kGradient};
  hub.DropNext(k);
  ASSERT_TRUE(hub.endpoint(2)->Send(1, MakeMessage(k, 1, 1, 1)).ok());
  auto r = hub.endpoint(1)->Recv(2, k, absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  hub.Kill(2);
  auto r2 = hub.endpoint(1)->Recv(2, k, Soon());
  EXPECT_EQ(r2.status().code(), absl::StatusCode::kUnavailable);
  // Links not involving the dead rank keep working.
  ASSERT_TRUE(hub.endpoint(0)->Send(1, MakeMessage(k, 1, 1, 5)).ok());
  EXPECT_TRUE(hub.endpoint(1)->Recv(0, k, Soon()).ok());
}

TEST(FakeTransport, DelayDelaysDelivery) {
  FakeTransportHub hub(2);
  hub.set_delay(absl::Milliseconds(150));
  MessageKey k{0, 0, 0, TensorRole::kActivation};
  const absl::Time start = absl::Now();
  ASSERT_TRUE(hub.endpoint(0)->Send(1, MakeMessage(k, 1, 1, 1)).ok());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));  // the send did not block
  ASSERT_TRUE(hub.endpoint(1)->Recv(0, k, Soon()).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(140));
}

// A worker keeps its listening socket between jobs and each transport accepts on a duplicate:
// closing the duplicate (the transport ending) leaves the port listening and reserved.
TEST(TcpTransport, ListenerDuplicateLeavesThePortListening) {
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = (*listener)->port();
  {
    auto duplicate = (*listener)->Duplicate();
    ASSERT_TRUE(duplicate.ok()) << duplicate.status();
    EXPECT_EQ((*duplicate)->port(), port);
    EXPECT_NE((*duplicate)->fd(), (*listener)->fd());
  }
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << "the port stopped listening when the duplicate closed";
  ::close(fd);
  EXPECT_FALSE(TcpListener::Bind("127.0.0.1", port).ok()) << "the port is still ours";
}

// The accepting side takes only peers of its own session: a dial left over from an earlier
// attempt (another tag) waiting in the backlog is closed, the right one becomes the link.
TEST(TcpTransport, DialFromAnotherSessionIsNotTakenForALink) {
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const std::string address = absl::StrCat("127.0.0.1:", (*listener)->port());
  // The stale dial: rank 0 of session 7 connects and says hello before rank 1 accepts.
  int stale = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>((*listener)->port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::connect(stale, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const uint32_t hello[4] = {0x4f4c4548, 0, 7, 0};  // "HELO", rank 0, session tag 7
  ASSERT_EQ(::send(stale, hello, sizeof(hello), 0), 16);
  auto accept = AcceptRankZero(std::move(*listener), address, 8, absl::Seconds(10));
  auto dial = DialRankOne(address, absl::Seconds(10));
  ASSERT_TRUE(dial.ok()) << dial.status();
  auto accepted = accept.get();
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  const MessageKey k{0, 0, 0, TensorRole::kActivation};
  ASSERT_TRUE((*dial)->Send(1, MakeMessage(k, 2, 2, 1.0f)).ok());
  auto got = (*accepted)->Recv(0, k, Soon());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, std::vector<float>({1, 2, 3, 4}));
  char byte;
  EXPECT_EQ(::recv(stale, &byte, 1, 0), 0) << "the stale dial was not closed";
  ::close(stale);
}

// A rank that stops on an error (its executor aborts the transport) says why in its goodbye, so
// its peers' errors name the cause instead of "finished its run".
TEST(TcpTransport, PeerThatStoppedOnAnErrorSaysWhy) {
  auto t = ConnectRing(2);
  MessageKey k{0, 0, 0, TensorRole::kActivation};
  auto pending = std::async(std::launch::async, [&] { return t[1]->Recv(0, k, Soon()); });
  t[0]->Abort(absl::DataLossError("checkpoint step-3 is torn"));
  t[0].reset();
  auto r = pending.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("rank 0 at 127.0.0.1:"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("stopped on an error: DATA_LOSS: checkpoint step-3 is torn"),
            std::string::npos)
      << r.status();
}

// The port of rank 1 is held by a worker of another job (session 7, waiting for its own rank 0):
// it turns the dial away, and the dialer does not take it for its peer; it keeps dialing and
// names what it found when the connect timeout ends.
TEST(TcpTransport, DialerDoesNotTakeAnotherJobsWorkerForItsPeer) {
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const std::string address = absl::StrCat("127.0.0.1:", (*listener)->port());
  auto other_job = AcceptRankZero(std::move(*listener), address, 7, absl::Seconds(2));
  auto dial = DialRankOne(address);
  EXPECT_EQ(dial.status().code(), absl::StatusCode::kDeadlineExceeded) << dial.status();
  EXPECT_NE(dial.status().message().find("could not reach rank 1 at " + address), std::string::npos)
      << dial.status();
  EXPECT_NE(dial.status().message().find("did not answer as rank 1 of this job"), std::string::npos)
      << dial.status();
  EXPECT_EQ(other_job.get().status().code(), absl::StatusCode::kDeadlineExceeded);
}

// A connection that never says hello (a port scan, a client at the wrong port) waiting in rank
// 1's backlog ahead of rank 0 does not stall the accepts: rank 0 is taken within moments.
TEST(TcpTransport, ASilentConnectionDoesNotStallTheAccepts) {
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const int port = (*listener)->port();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::connect(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const absl::Time start = absl::Now();
  auto accept = AcceptRankZero(std::move(*listener), address, 8, absl::Seconds(20));
  auto dial = DialRankOne(address, absl::Seconds(20));
  ASSERT_TRUE(dial.ok()) << dial.status();
  auto accepted = accept.get();
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
  ::close(silent);
}

// A listener that answers every hello with `answer` (16 bytes) until `stop`.
std::thread AnsweringListener(int listen_fd, const uint32_t (&answer)[4], std::atomic<bool>* stop) {
  return std::thread([listen_fd, answer, stop] {
    while (!stop->load()) {
      pollfd pfd{listen_fd, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      const int fd = ::accept(listen_fd, nullptr, nullptr);
      if (fd < 0) continue;
      uint32_t hello[4];
      if (::recv(fd, hello, sizeof(hello), MSG_WAITALL) == sizeof(hello)) {
        (void)::send(fd, answer, sizeof(answer), MSG_NOSIGNAL);
      }
      ::close(fd);
    }
  });
}

// Whoever answers must be rank 1 of this session: a misplaced rank of the same job and a process
// that does not speak the protocol are both refused, each named.
TEST(TcpTransport, AnAnswerFromTheWrongRankOrProcessIsRefusedNamingIt) {
  struct Case {
    uint32_t answer[4];
    std::string expected;
  };
  const Case cases[] = {
      {{0x4f4c4548, 2, 8, 0}, "the worker listening there is rank 2, not rank 1"},
      {{0x4f4c4548, 1, 7, 0}, "belongs to another job or attempt (its rank 1)"},
      {{0x54544820, 0x2e312f50, 0x30302031, 0x00000a30}, "is not a pipetrain worker"},
  };
  for (const Case& c : cases) {
    auto listener = TcpListener::Bind("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok());
    std::atomic<bool> stop{false};
    std::thread server = AnsweringListener((*listener)->fd(), c.answer, &stop);
    auto dial = DialRankOne(absl::StrCat("127.0.0.1:", (*listener)->port()));
    stop = true;
    server.join();
    EXPECT_EQ(dial.status().code(), absl::StatusCode::kDeadlineExceeded) << dial.status();
    EXPECT_NE(dial.status().message().find(c.expected), std::string::npos) << dial.status();
  }
}

}  // namespace
}  // namespace pipetrain::worker
