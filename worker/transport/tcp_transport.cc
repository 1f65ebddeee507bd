#include "worker/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "worker/transport/frame_header.h"

namespace pipetrain::worker {
namespace {

constexpr uint32_t kHelloMagic = 0x4f4c4548;  // "HELO"
constexpr absl::Duration kHelloWait = absl::Seconds(2);  // for an accepted connection's hello

struct Hello {
  uint32_t magic;
  int32_t rank;
  uint64_t session_tag;
};

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Writes all `n` bytes or fails.
absl::Status WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      return Errno("send");
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return absl::OkStatus();
}

// Reads exactly `n` bytes. Returns Unavailable on EOF ("closed") or error.
absl::Status ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k == 0) return absl::UnavailableError("connection closed");
    if (k < 0) {
      if (errno == EINTR) continue;
      return Errno("recv");
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return absl::OkStatus();
}

// The payload goes in 1 MiB pieces, each hashed while it is still in cache, and its XXH3
// checksum after it: one pass over the tensor on each side instead of two.
constexpr size_t kPiece = 1 << 20;

absl::Status WritePayload(int fd, const void* data, size_t n, bool checksummed) {
  if (!checksummed) return WriteAll(fd, data, n);
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  const char* p = static_cast<const char*>(data);
  absl::Status status;
  for (size_t done = 0; done < n && status.ok(); done += kPiece) {
    const size_t len = std::min(kPiece, n - done);
    XXH3_64bits_update(state, p + done, len);
    status = WriteAll(fd, p + done, len);
  }
  const uint64_t checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (status.ok()) status = WriteAll(fd, &checksum, sizeof(checksum));
  return status;
}

absl::Status ReadPayload(int fd, void* data, size_t n, bool checksummed, uint64_t* checksum) {
  if (!checksummed) return ReadAll(fd, data, n);
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  char* p = static_cast<char*>(data);
  absl::Status status;
  for (size_t done = 0; done < n && status.ok(); done += kPiece) {
    const size_t len = std::min(kPiece, n - done);
    status = ReadAll(fd, p + done, len);
    XXH3_64bits_update(state, p + done, len);
  }
  *checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return status;
}

void TuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

absl::StatusOr<std::pair<std::string, int>> SplitAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", address, "\" is not host:port with port in 1..65535"));
  }
  return std::make_pair(address.substr(0, colon), port);
}

absl::StatusOr<int> ConnectOnce(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", host, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = Errno("socket");
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    last = Errno(absl::StrCat("connect ", host, ":", port));
    ::close(fd);
  }
  freeaddrinfo(res);
  return last;
}

// Bounds every later recv on `fd` by `timeout` (at least 1 ms); zero lifts the bound.
void SetRecvTimeout(int fd, absl::Duration timeout) {
  const int64_t us = timeout <= absl::ZeroDuration()
                         ? 0
                         : std::max<int64_t>(absl::ToInt64Microseconds(timeout), 1000);
  const timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// One dial of rank `peer`: connects, says `hello` and waits (until `deadline`) for the peer's
// answer. A listener that closes the connection instead, or answers as another rank or job, is
// not the peer: a stale worker or an unrelated process holds the port, or (a stale dial of ours)
// the peer turned it away; the caller dials again.
absl::StatusOr<int> DialPeer(const std::string& host, int port, const Hello& hello, int peer,
                             absl::Time deadline) {
  PT_ASSIGN_OR_RETURN(int fd, ConnectOnce(host, port));
  // Wait for the answer as long as the connect timeout allows, never less than a moment: the
  // peer answers only once it has dialed its own higher peers, and a dial abandoned here could
  // still be taken for a link when the peer gets to it.
  SetRecvTimeout(fd, std::max(deadline - absl::Now(), absl::Milliseconds(100)));
  Hello answer{};
  absl::Status status = WriteAll(fd, &hello, sizeof(hello));
  if (status.ok()) status = ReadAll(fd, &answer, sizeof(answer));
  if (status.ok() && (answer.magic != kHelloMagic || answer.rank != peer ||
                      answer.session_tag != hello.session_tag)) {
    if (answer.magic != kHelloMagic) {
      status = absl::UnavailableError("the process listening there is not a pipetrain worker");
    } else if (answer.session_tag != hello.session_tag) {
      status = absl::UnavailableError(
          absl::StrCat("the worker listening there belongs to another job or attempt (its rank ",
                       answer.rank, ")"));
    } else {
      status = absl::UnavailableError(absl::StrCat("the worker listening there is rank ",
                                                   answer.rank, ", not rank ", peer,
                                                   " (do the ranks' address lists agree?)"));
    }
  } else if (!status.ok()) {
    status =
        absl::UnavailableError(absl::StrCat("the process listening there did not answer as rank ",
                                            peer, " of this job (", status.message(), ")"));
  }
  if (!status.ok()) {
    ::close(fd);
    return status;
  }
  SetRecvTimeout(fd, absl::ZeroDuration());
  return fd;
}

}  // namespace

std::string ListenHostFor(const std::string& host) {
  if (host == "localhost") return "127.0.0.1";
  in_addr ignored;
  return inet_pton(AF_INET, host.c_str(), &ignored) == 1 ? host : "0.0.0.0";
}

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Bind(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("listen host \"", host, "\" is not an IPv4 address"));
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    absl::Status status = Errno(absl::StrCat("bind/listen ", host, ":", port));
    ::close(fd);
    return status;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<TcpListener>(new TcpListener(fd, ntohs(addr.sin_port)));
}

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Duplicate() const {
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Errno(absl::StrCat("duplicating the listener on port ", port_));
  return std::unique_ptr<TcpListener>(new TcpListener(fd, port_));
}

TcpListener::~TcpListener() { ::close(fd_); }

TcpTransport::TcpTransport(TcpTransportOptions options)
    : options_(std::move(options)), mailbox_(static_cast<int>(options_.addresses.size())) {
  links_.resize(options_.addresses.size());
}

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Connect(
    const TcpTransportOptions& options, std::unique_ptr<TcpListener> listener) {
  const int n = static_cast<int>(options.addresses.size());
  if (options.rank < 0 || options.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " is outside 0..", n - 1));
  }
  for (int peer : options.peers) {
    if (peer < 0 || peer >= n || peer == options.rank) {
      return absl::InvalidArgumentError(absl::StrCat("peer ", peer, " must be a rank in 0..", n - 1,
                                                     " other than ", options.rank));
    }
  }
  auto transport = std::unique_ptr<TcpTransport>(new TcpTransport(options));
  const absl::Time deadline = absl::Now() + options.connect_timeout;

  // Lower rank connects: dial every higher peer, retrying until its listener is up and it is
  // the peer that answers.
  const Hello hello{kHelloMagic, options.rank, options.session_tag};
  for (int peer : options.peers) {
    if (peer < options.rank) continue;
    PT_ASSIGN_OR_RETURN(auto host_port, SplitAddress(options.addresses[peer]));
    absl::StatusOr<int> fd;
    while (!(fd = DialPeer(host_port.first, host_port.second, hello, peer, deadline)).ok()) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", options.rank, " could not reach rank ", peer, " at ", options.addresses[peer],
            " within the connect timeout: ", fd.status().message()));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    TuneSocket(*fd);
    auto link = std::make_unique<Link>();
    link->peer = peer;
    link->fd = *fd;
    transport->links_[peer] = std::move(link);
  }
  // Higher rank accepts: every lower peer introduces itself.
  int expected = 0;
  for (int peer : options.peers) expected += peer < options.rank ? 1 : 0;
  while (expected > 0) {
    pollfd pfd{listener->fd(), POLLIN, 0};
    int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (wait_ms <= 0 || ::poll(&pfd, 1, wait_ms) <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", options.rank, " is still waiting for ", expected,
                       " lower-ranked peer(s) to connect after the connect timeout"));
    }
    int fd = ::accept4(listener->fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // A dialer says hello as soon as it connects: a connection that stays silent (a port scan, a
    // client at the wrong port) is dropped after a moment instead of stalling the accepts.
    SetRecvTimeout(fd, std::min(deadline - absl::Now(), kHelloWait));
    Hello hello{};
    if (!ReadAll(fd, &hello, sizeof(hello)).ok() || hello.magic != kHelloMagic || hello.rank < 0 ||
        hello.rank >= options.rank || hello.session_tag != options.session_tag ||
        transport->links_[hello.rank] != nullptr) {
      ::close(fd);  // a stray, stale (other session) or duplicate connection; not one of ours
      continue;
    }
    // Answer, so that the dialer knows it reached this rank of its own job.
    const Hello answer{kHelloMagic, options.rank, options.session_tag};
    if (!WriteAll(fd, &answer, sizeof(answer)).ok()) {
      ::close(fd);
      continue;
    }
    SetRecvTimeout(fd, absl::ZeroDuration());
    TuneSocket(fd);
    auto link = std::make_unique<Link>();
    link->peer = hello.rank;
    link->fd = fd;
    transport->links_[hello.rank] = std::move(link);
    --expected;
  }
  for (auto& link : transport->links_) {
    if (link == nullptr) continue;
    Link* raw = link.get();
    TcpTransport* self = transport.get();
    link->reader = std::thread([self, raw] { self->ReadLoop(raw); });
    link->writer = std::thread([self, raw] { self->WriteLoop(raw); });
  }
  return transport;
}

TcpTransport::~TcpTransport() {
  // Graceful part: let every writer drain its queue and say goodbye (bounded wait).
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (auto& link : links_) {
    if (link == nullptr) continue;
    absl::MutexLock lock(&link->mu);
    link->goodbye_requested = true;
  }
  for (auto& link : links_) {
    if (link == nullptr) continue;
    absl::MutexLock lock(&link->mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) { return link->writer_done; };
    link->mu.AwaitWithDeadline(absl::Condition(&done), deadline);
  }
  stopping_ = true;
  mailbox_.FailAll(absl::CancelledError("transport shut down"));
  for (auto& link : links_) {
    if (link == nullptr) continue;
    {
      absl::MutexLock lock(&link->mu);
      link->queue.clear();
    }
    ::shutdown(link->fd, SHUT_RDWR);
  }
  for (auto& link : links_) {
    if (link == nullptr) continue;
    if (link->reader.joinable()) link->reader.join();
    if (link->writer.joinable()) link->writer.join();
    ::close(link->fd);
  }
}

absl::Status TcpTransport::CheckPeer(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(links_.size()) || links_[peer] == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options_.rank, " has no link to rank ", peer));
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::Send(int peer, Message message) {
  PT_RETURN_IF_ERROR(CheckPeer(peer));
  PT_RETURN_IF_ERROR(mailbox_.LinkStatus(peer));
  {
    absl::MutexLock lock(&links_[peer]->mu);
    PT_RETURN_IF_ERROR(links_[peer]->send_status);
  }
  PT_RETURN_IF_ERROR(CheckSendable(message, options_.max_message_bytes));
  Link* link = links_[peer].get();
  absl::MutexLock lock(&link->mu);
  link->queue.push_back(std::move(message));
  return absl::OkStatus();
}

void TcpTransport::WriteLoop(Link* link) {
  const auto finish = [&](absl::Status status) {
    absl::MutexLock lock(&link->mu);
    if (!status.ok() && link->send_status.ok()) link->send_status = status;
    link->writing = false;
    link->writer_done = true;
    link->queue.clear();
  };
  while (true) {
    Message message;
    {
      absl::MutexLock lock(&link->mu);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
        return !link->queue.empty() || link->goodbye_requested || stopping_.load();
      };
      link->mu.Await(absl::Condition(&ready));
      if (stopping_) {
        link->writer_done = true;
        return;
      }
      if (link->queue.empty()) {  // drained and asked to say goodbye
        link->writing = true;
      } else {
        message = std::move(link->queue.front());
        link->queue.pop_front();
        link->writing = true;
      }
    }
    if (message.shape.empty() && message.data.empty()) {  // the bye sentinel
      // A run that stopped on an error says why, so the peer's error names the cause.
      std::string reason;
      {
        absl::MutexLock lock(&abort_mu_);
        reason = abort_reason_.substr(0, kMaxByeReasonBytes);
      }
      FrameHeader bye = EmptyHeader(/*bye=*/true);
      bye.payload_bytes = reason.size();
      absl::Status status = WriteAll(link->fd, &bye, sizeof(bye));
      if (status.ok()) status = WriteAll(link->fd, reason.data(), reason.size());
      finish(status);
      return;
    }
    FrameHeader header = MessageHeader(message);
    if (options_.checksum) header.flags |= kFrameChecksumTrailer;
    absl::Status status = WriteAll(link->fd, &header, sizeof(header));
    if (status.ok()) {
      status = WritePayload(link->fd, message.data.data(), header.payload_bytes, options_.checksum);
    }
    if (!status.ok()) {
      status = absl::UnavailableError(absl::StrCat("sending to rank ", link->peer, " at ",
                                                   options_.addresses[link->peer],
                                                   " failed: ", status.message()));
      // Fail the receive side too: a broken socket carries nothing either way.
      if (!stopping_) mailbox_.Fail(link->peer, status);
      finish(status);
      return;
    }
    sent_bytes_ += message.bytes();
    ++sent_messages_;
    absl::MutexLock lock(&link->mu);
    link->writing = false;
  }
}

void TcpTransport::ReadLoop(Link* link) {
  const auto fail = [&](absl::Status status) {
    if (!stopping_) mailbox_.Fail(link->peer, std::move(status));
  };
  const std::string who = absl::StrCat("rank ", link->peer, " at ", options_.addresses[link->peer]);
  while (true) {
    FrameHeader header{};
    if (absl::Status s = ReadAll(link->fd, &header, sizeof(header)); !s.ok()) {
      fail(absl::UnavailableError(absl::StrCat("lost ", who, ": ", s.message())));
      return;
    }
    if (header.magic == kByeMagic) {
      std::string reason(std::min<uint64_t>(header.payload_bytes, kMaxByeReasonBytes), '\0');
      if (reason.empty() || !ReadAll(link->fd, reason.data(), reason.size()).ok()) {
        fail(absl::UnavailableError(absl::StrCat(who, " finished its run and closed the link")));
      } else {
        fail(absl::UnavailableError(absl::StrCat(who, " stopped on an error: ", reason)));
      }
      return;
    }
    // Every frame on a TCP link carries a message.
    if (absl::Status s = CheckReceivedHeader(header, options_.max_message_bytes, who);
        !s.ok() || !HasMessage(header)) {
      fail(s.ok() ? absl::DataLossError(absl::StrCat("malformed frame header from ", who)) : s);
      return;
    }
    const MessageKey key = KeyOf(header);
    Message message;
    message.key = key;
    message.shape = ShapeOf(header);
    message.data = TakeBuffer(static_cast<size_t>(header.payload_bytes / sizeof(float)));
    const bool checksummed = (header.flags & kFrameChecksumTrailer) != 0;
    uint64_t checksum = 0, expected = 0;
    absl::Status s =
        ReadPayload(link->fd, message.data.data(), header.payload_bytes, checksummed, &checksum);
    if (s.ok() && checksummed) s = ReadAll(link->fd, &expected, sizeof(expected));
    if (!s.ok()) {
      fail(absl::UnavailableError(
          absl::StrCat("lost ", who, " in the middle of ", ToString(key), ": ", s.message())));
      return;
    }
    if (checksum != expected) {
      fail(absl::DataLossError(absl::StrCat("corrupted tensor from ", who, " (", ToString(key),
                                            "): checksum mismatch")));
      return;
    }
    received_bytes_ += message.bytes();
    ++received_messages_;
    mailbox_.Put(link->peer, std::move(message));
  }
}

absl::StatusOr<Message> TcpTransport::Recv(int peer, const MessageKey& key, absl::Time deadline) {
  PT_RETURN_IF_ERROR(CheckPeer(peer));
  return mailbox_.Take(peer, key, deadline);
}

absl::Status TcpTransport::Flush(absl::Time deadline) {
  for (auto& link : links_) {
    if (link == nullptr) continue;
    absl::MutexLock lock(&link->mu);
    auto drained = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
      return (link->queue.empty() && !link->writing) || !link->send_status.ok();
    };
    if (!link->mu.AwaitWithDeadline(absl::Condition(&drained), deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("sends to rank ", link->peer, " did not drain before the deadline"));
    }
    if (!link->send_status.ok()) return link->send_status;
  }
  return absl::OkStatus();
}

void TcpTransport::Abort(absl::Status status) {
  {
    absl::MutexLock lock(&abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = status.ToString();
  }
  mailbox_.FailAll(status);
  for (auto& link : links_) {
    if (link == nullptr) continue;
    absl::MutexLock lock(&link->mu);
    if (link->send_status.ok()) link->send_status = status;
    link->queue.clear();
  }
}

void TcpTransport::Recycle(std::vector<float> buffer) {
  constexpr size_t kMaxPooled = 8;  // a few in flight per peer is all a pipeline needs
  absl::MutexLock lock(&pool_mu_);
  if (pool_.size() < kMaxPooled && buffer.capacity() > 0) pool_.push_back(std::move(buffer));
}

std::vector<float> TcpTransport::TakeBuffer(size_t elements) {
  std::vector<float> buffer;
  {
    absl::MutexLock lock(&pool_mu_);
    for (size_t i = 0; i < pool_.size(); ++i) {
      if (pool_[i].capacity() >= elements) {
        buffer = std::move(pool_[i]);
        pool_.erase(pool_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  // Shrinking keeps the bytes (no fill); only growth beyond the old size zero-fills.
  buffer.resize(elements);
  return buffer;
}

TransportStats TcpTransport::stats() const {
  return TransportStats{sent_bytes_.load(), received_bytes_.load(), sent_messages_.load(),
                        received_messages_.load()};
}

}  // namespace pipetrain::worker
