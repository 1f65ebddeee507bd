// TcpTransport: the CPU transport between worker processes, one TCP connection per peer.
//
// Why plain TCP rather than Gloo or gRPC streams: pipeline traffic is point-to-point between
// neighbours, which is all a socket is; a socket gives us our own framing (a 72-byte header
// with the message key and shape, the raw float32 payload, then its XXH3 checksum; no
// serialization copy), exact control over timeouts and failure detection (EOF on a lost peer
// fails pending receives at once), and bench/transport measures it against a raw socket copy
// of the same bytes (docs/BENCHMARKS.md). Gloo's pairs add a rendezvous store and no failure
// semantics we need; gRPC streams add protobuf framing and copies of every payload.
//
// Shutdown: destroying the transport drains queued sends, then writes a goodbye frame, so a
// peer can tell "finished its run" from "lost" (EOF without goodbye). After Abort the goodbye
// carries the abort's status as text, and the peer's errors read "stopped on an error: <why>".
//
// Connection rule: the lower rank connects to the higher rank's listener and introduces itself
// with a hello frame; the higher rank answers with its own, so a dialer never takes another
// process that holds the port (another job's worker, a stale one) for its peer. Each side then
// runs one reader and one writer thread per peer.
//
// Thread-safety: thread-safe (Transport contract).
#ifndef PIPETRAIN_WORKER_TRANSPORT_TCP_TRANSPORT_H_
#define PIPETRAIN_WORKER_TRANSPORT_TCP_TRANSPORT_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/transport/mailbox.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

// A bound, listening socket. Bind first (port 0 picks a free port), learn the port, then hand
// the listener to TcpTransport::Connect.
// The address a rank listens on for its own peers' address `host`: an IPv4 literal as it is,
// "localhost" as 127.0.0.1, and any other name (a pod's DNS name in a JobSet, say: that name is
// how the peers reach this rank, the rank does not resolve itself) as 0.0.0.0.
std::string ListenHostFor(const std::string& host);

class TcpListener {
 public:
  static absl::StatusOr<std::unique_ptr<TcpListener>> Bind(const std::string& host, int port);
  // Another descriptor of the same listening socket: closing it leaves this one listening, so
  // its owner keeps the port while a transport accepts on (and then closes) the duplicate.
  absl::StatusOr<std::unique_ptr<TcpListener>> Duplicate() const;
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  TcpListener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

struct TcpTransportOptions {
  int rank = 0;
  std::vector<std::string> addresses;  // "host:port" of every rank's listener
  std::vector<int> peers;              // ranks this worker exchanges messages with
  absl::Duration connect_timeout = absl::Seconds(30);
  int64_t max_message_bytes = int64_t{1} << 30;  // larger frames fail the link (DataLoss)
  // Checksum every payload (XXH3 trailer, verified by the receiver). Costs about a tenth of
  // loopback bandwidth; turn off only where the link's own integrity is trusted.
  bool checksum = true;
  // Said in the hello; the accepting side takes only peers that say the same (a worker's
  // listener outlives its jobs, so a dial left over from an earlier attempt can be waiting in
  // its backlog). Both sides must agree; e.g. a hash of job id and attempt.
  uint64_t session_tag = 0;
};

class TcpTransport final : public Transport {
 public:
  // Connects to every peer (lower ranks connect, higher ranks accept) within connect_timeout.
  static absl::StatusOr<std::unique_ptr<TcpTransport>> Connect(
      const TcpTransportOptions& options, std::unique_ptr<TcpListener> listener);
  ~TcpTransport() override;

  int rank() const override { return options_.rank; }
  absl::Status Send(int peer, Message message) override;
  absl::StatusOr<Message> Recv(int peer, const MessageKey& key, absl::Time deadline) override;
  absl::Status Flush(absl::Time deadline) override;
  TransportStats stats() const override;
  void Abort(absl::Status status) override;
  void Recycle(std::vector<float> buffer) override;

 private:
  struct Link {
    int peer = -1;
    int fd = -1;
    std::thread reader;
    std::thread writer;
    absl::Mutex mu;
    std::deque<Message> queue ABSL_GUARDED_BY(mu);
    bool writing ABSL_GUARDED_BY(mu) = false;
    bool goodbye_requested ABSL_GUARDED_BY(mu) = false;  // write a goodbye once drained
    bool writer_done ABSL_GUARDED_BY(mu) = false;
    absl::Status send_status ABSL_GUARDED_BY(mu);  // first write error
  };

  explicit TcpTransport(TcpTransportOptions options);
  absl::Status CheckPeer(int peer) const;
  void ReadLoop(Link* link);
  void WriteLoop(Link* link);

  const TcpTransportOptions options_;
  // Takes a buffer of at least `elements` capacity from the pool (or a new one), sized to it.
  std::vector<float> TakeBuffer(size_t elements);

  Mailbox mailbox_;
  absl::Mutex pool_mu_;
  std::vector<std::vector<float>> pool_ ABSL_GUARDED_BY(pool_mu_);
  std::vector<std::unique_ptr<Link>> links_;  // indexed by rank; null for non-peers
  std::atomic<bool> stopping_{false};
  // The first Abort's status, said in every goodbye (at most kMaxByeReasonBytes of it).
  static constexpr size_t kMaxByeReasonBytes = 2048;
  absl::Mutex abort_mu_;
  std::string abort_reason_ ABSL_GUARDED_BY(abort_mu_);
  std::atomic<int64_t> sent_bytes_{0}, received_bytes_{0}, sent_messages_{0}, received_messages_{0};
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_TCP_TRANSPORT_H_
