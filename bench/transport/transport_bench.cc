// Transport bandwidth between two processes on loopback: pipetrain's TcpTransport against a
// plain TCP socket copy of the same bytes, measured side by side in one run.
//
// For each tensor size, a child process first receives two untimed warm-up tensors (so both
// methods start with their receive buffers faulted in, as in a running pipeline) and acks them;
// then it receives `count` tensors and answers with one small ack; the parent times from its
// first timed send to that ack. Each (size, method) pair is run
// `repeats` times, interleaved, and the best time is kept (the machine is shared and noisy).
// Output: a Markdown table on stdout and, with --json FILE, machine-readable results.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/heap_policy.h"
#include "worker/transport/tcp_transport.h"

namespace pipetrain::worker {
namespace {

constexpr int64_t kTotalBytesPerRun = int64_t{256} << 20;
constexpr int64_t kWarmup = 2;

int64_t CountFor(int64_t bytes) { return std::max<int64_t>(8, kTotalBytesPerRun / bytes); }

// Raw socket: child accepts, reads count*bytes, writes 1 byte back.
double RawRun(int64_t bytes, int64_t count) {
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  if (!listener.ok()) std::abort();
  const int port = (*listener)->port();
  pid_t child = fork();
  if (child == 0) {
    int fd = ::accept((*listener)->fd(), nullptr, nullptr);
    // Each tensor lands whole in a tensor-sized buffer (allocated once and reused), as a
    // receiver that hands tensors to compute must; a small ring buffer would stay in cache and
    // measure the kernel copy alone.
    std::vector<char> buf(bytes);
    char ack = 1;
    for (int64_t i = 0; i < count + kWarmup; ++i) {
      int64_t got = 0;
      while (got < bytes) {
        ssize_t k = ::recv(fd, buf.data() + got, bytes - got, 0);
        if (k <= 0) _exit(1);
        got += k;
      }
      if (i == kWarmup - 1) ::send(fd, &ack, 1, 0);
    }
    ::send(fd, &ack, 1, 0);
    ::close(fd);
    _exit(0);
  }
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) std::abort();
  std::vector<float> payload(bytes / sizeof(float), 1.5f);
  char ack = 0;
  absl::Time start;
  for (int64_t i = 0; i < count + kWarmup; ++i) {
    if (i == kWarmup) {
      if (::recv(fd, &ack, 1, MSG_WAITALL) != 1) std::abort();
      start = absl::Now();
    }
    const char* p = reinterpret_cast<const char*>(payload.data());
    int64_t left = bytes;
    while (left > 0) {
      ssize_t k = ::send(fd, p, left, MSG_NOSIGNAL);
      if (k <= 0) std::abort();
      p += k;
      left -= k;
    }
  }
  if (::recv(fd, &ack, 1, MSG_WAITALL) != 1) std::abort();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  ::close(fd);
  waitpid(child, nullptr, 0);
  return seconds;
}

// TcpTransport: rank 1 (child) receives `count` activations, then sends a 1-element gradient.
double TransportRun(int64_t bytes, int64_t count, bool checksum) {
  auto l0 = TcpListener::Bind("127.0.0.1", 0);
  auto l1 = TcpListener::Bind("127.0.0.1", 0);
  if (!l0.ok() || !l1.ok()) std::abort();
  TcpTransportOptions options;
  options.checksum = checksum;
  options.addresses = {absl::StrCat("127.0.0.1:", (*l0)->port()),
                       absl::StrCat("127.0.0.1:", (*l1)->port())};
  pid_t child = fork();
  if (child == 0) {
    options.rank = 1;
    options.peers = {0};
    auto t = TcpTransport::Connect(options, std::move(*l1));
    if (!t.ok()) _exit(1);
    const auto send_ack = [&](int32_t id) {
      Message ack;
      ack.key = MessageKey{0, 1, id, TensorRole::kGradient};
      ack.shape = {1};
      ack.data = {1.0f};
      (void)(*t)->Send(0, std::move(ack));
    };
    for (int64_t i = 0; i < count + kWarmup; ++i) {
      MessageKey key{0, 0, static_cast<int32_t>(i), TensorRole::kActivation};
      auto received = (*t)->Recv(0, key, absl::InfiniteFuture());
      if (!received.ok()) _exit(2);
      (*t)->Recycle(std::move(received->data));  // as the executor does once it has the tensor
      if (i == kWarmup - 1) send_ack(0);
    }
    send_ack(1);
    (void)(*t)->Flush(absl::InfiniteFuture());
    _exit(0);
  }
  options.rank = 0;
  options.peers = {1};
  auto t = TcpTransport::Connect(options, std::move(*l0));
  if (!t.ok()) std::abort();
  const int64_t elements = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<Message> messages(count + kWarmup);
  for (int64_t i = 0; i < count + kWarmup; ++i) {
    messages[i].key = MessageKey{0, 0, static_cast<int32_t>(i), TensorRole::kActivation};
    messages[i].shape = {elements};
    messages[i].data.assign(elements, 1.5f);
  }
  absl::Time start;
  for (int64_t i = 0; i < count + kWarmup; ++i) {
    if (i == kWarmup) {
      auto warm = (*t)->Recv(1, MessageKey{0, 1, 0, TensorRole::kGradient}, absl::InfiniteFuture());
      if (!warm.ok()) std::abort();
      start = absl::Now();
    }
    if (!(*t)->Send(1, std::move(messages[i])).ok()) std::abort();
  }
  auto ack = (*t)->Recv(1, MessageKey{0, 1, 1, TensorRole::kGradient}, absl::InfiniteFuture());
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!ack.ok()) std::abort();
  t->reset();
  waitpid(child, nullptr, 0);
  return seconds;
}

}  // namespace
}  // namespace pipetrain::worker

int main(int argc, char** argv) {
  using namespace pipetrain::worker;
  // As pipetrain-worker does, so that steady-state messages do not page-fault on fresh mmaps.
  pipetrain::KeepFreedMemoryInHeap();
  std::string json_path;
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json" && i + 1 < argc) json_path = argv[++i];
    if (std::string(argv[i]) == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
  }
  const std::vector<int64_t> sizes = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  std::printf(
      "| tensor | messages | raw socket GB/s | TcpTransport GB/s (checksummed) | ratio | "
      "TcpTransport GB/s (no checksum) | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::string json = "[";
  for (int64_t bytes : sizes) {
    const int64_t count = CountFor(bytes);
    double raw = 1e30, ours = 1e30, plain = 1e30;
    for (int r = 0; r < repeats; ++r) {
      raw = std::min(raw, RawRun(bytes, count));
      ours = std::min(ours, TransportRun(bytes, count, true));
      plain = std::min(plain, TransportRun(bytes, count, false));
    }
    const double total = static_cast<double>(bytes * count);
    const double raw_gbs = total / raw / 1e9, ours_gbs = total / ours / 1e9;
    const double plain_gbs = total / plain / 1e9;
    std::printf("| %lld KiB | %lld | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                static_cast<long long>(bytes >> 10), static_cast<long long>(count), raw_gbs,
                ours_gbs, ours_gbs / raw_gbs, plain_gbs, plain_gbs / raw_gbs);
    std::fflush(stdout);
    json += absl::StrCat(json.size() > 1 ? "," : "", "{\"bytes\":", bytes, ",\"messages\":", count,
                         ",\"raw_gbps\":", raw_gbs, ",\"transport_gbps\":", ours_gbs,
                         ",\"ratio\":", ours_gbs / raw_gbs,
                         ",\"transport_no_checksum_gbps\":", plain_gbs, "}");
  }
  json += "]\n";
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f != nullptr) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}
