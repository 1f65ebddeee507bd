// NcclTransport: the Transport (transport.h) of the CUDA build, over NCCL point-to-point
// (ncclSend/ncclRecv) on one communicator spanning the job's ranks. Built only with
// PIPETRAIN_ENABLE_CUDA.
//
// Bootstrap: one rank (the coordinator, or for now whoever writes the plan file) creates an
// ncclUniqueId with NewNcclUniqueId(); its bytes travel in PrepareRequest.nccl_unique_id
// (proto/pipetrain/v1/worker.proto) and every rank passes them to Create. The communicator is
// non-blocking (ncclConfig_t::blocking = 0): Create polls ncclCommGetAsyncError until it is
// ready, then does a first header exchange with every peer (NCCL connects a pair at its first
// send/receive), all within options.connect_timeout; past it the communicator is aborted and
// Create fails with DeadlineExceeded naming the peer ranks that did not answer.
//
// Why rounds. NCCL needs every send matched by a receive of the same size, posted in the same
// order on both sides, while our Recv is by key and messages arrive whenever their producer
// ran. So the transport's own thread runs lock-step *rounds* with all its peers: each round is
//   1. one ncclGroupStart/End holding, for every peer, ncclSend of this rank's 72-byte header and
//      ncclRecv of the peer's header. A header carries the MessageKey, shape, payload size and an
//      XXH3 checksum of the payload, or "no message" when this rank has nothing queued for that
//      peer;
//   2. if any header announced a payload, one more group with the matching ncclSend/ncclRecv of
//      the payloads (sizes now known on both sides).
// Send and receive of a pair are always in one group, so neighbours sending to each other in the
// same round cannot deadlock; a group is ended even when a call inside it fails. Received
// messages are checked (size, checksum: DataLoss on a mismatch, never consumed) and put in a
// Mailbox in arrival order; Recv takes them by key from there, exactly as with TCP. At most one
// message per peer and direction moves per round, preserving per-peer order.
//
// Idle rounds back off. Every round keeps an NCCL kernel in flight until both sides have posted
// it, so rounds every 50 us kept SMs busy on an idle link. After a round that moved nothing the
// thread sleeps options.idle_sleep, doubling each idle round up to options.idle_sleep_max, and a
// Send (or any moved payload) resets it. We chose this over carrying headers on a host channel
// because it keeps one channel and the lock-step protocol unchanged (a second, host channel
// would need its own addresses, failure handling and ordering against NCCL); the cost is at most
// idle_sleep_max of added latency for the first message after an idle spell, when the peer is
// asleep (the sender wakes at once).
// Shutdown: the destructor drains the queues, then sends a "bye" header; both sides drop the
// pair from later rounds after the round that carried a bye (so the lock-step stays matched),
// and a later Send to that peer fails with Unavailable, like TCP's goodbye frame.
//
// Staging: the executor speaks host Messages today (std::vector<float>), so each payload is
// copied into a pinned host buffer, host -> device buffer before ncclSend, and device -> pinned
// host after ncclRecv, on the transport's own CUDA stream. A copy between device and pageable
// memory is synchronous: it waited behind the spinning NCCL kernel (800 ms behind an 800 ms
// kernel, 0.02 ms into pinned memory), so nothing was polled while a peer was gone. Every copy
// is therefore asynchronous from pinned memory, and completion is an event polled with
// cudaEventQuery. Staging buffers are per peer and grow (geometrically) to the largest message.
// A device-tensor path (no staging) is the obvious next step once the executor hands device
// tensors to the transport.
//
// Failure: every wait polls, with a bound (options.peer_timeout per phase of a round), the
// event, ncclCommGetAsyncError and Abort(); the same state is checked before every group. A peer
// that vanished therefore fails all links with Unavailable within peer_timeout, and the
// communicator is aborted (ncclCommAbort; NCCL cannot tell which peer died). Abort() does the
// same at once with the given status.
//
// Device per thread: Create, the transport's thread and the destructor each make
// options.device current on their own thread (the CUDA device is per thread).
//
// Thread-safety: thread-safe (Transport contract). One internal thread owns the communicator,
// the stream and the buffers once it runs; public methods only touch the queues and the mailbox.
#ifndef PIPETRAIN_WORKER_TRANSPORT_NCCL_TRANSPORT_H_
#define PIPETRAIN_WORKER_TRANSPORT_NCCL_TRANSPORT_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/transport/frame_header.h"
#include "worker/transport/mailbox.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

// A fresh ncclUniqueId, serialized (sizeof(ncclUniqueId) = NCCL_UNIQUE_ID_BYTES bytes).
absl::StatusOr<std::string> NewNcclUniqueId();
std::string SerializeNcclUniqueId(const ncclUniqueId& id);
// InvalidArgument unless `bytes` is exactly NCCL_UNIQUE_ID_BYTES long.
absl::StatusOr<ncclUniqueId> ParseNcclUniqueId(absl::string_view bytes);

// Runs `body` (the ncclSend/ncclRecv calls of one group) between group_start() and
// group_end(). The group is always ended, also when the body fails: a group left open would
// swallow the next round's calls into it. Returns the first error. (The function parameters are
// for tests.)
absl::Status RunNcclGroup(const std::function<absl::Status()>& body,
                          ncclResult_t (*group_start)() = ncclGroupStart,
                          ncclResult_t (*group_end)() = ncclGroupEnd);

// The sleep after each round that moved nothing: `min`, then doubling up to `max`; Reset() when
// something moved or a message was queued.
class IdleBackoff {
 public:
  IdleBackoff(absl::Duration min, absl::Duration max);
  absl::Duration Next();
  void Reset() { next_ = min_; }

 private:
  absl::Duration min_, max_, next_;
};

struct NcclTransportOptions {
  int rank = 0;
  int world_size = 1;
  std::string unique_id;   // SerializeNcclUniqueId bytes, the same on every rank
  std::vector<int> peers;  // ranks this one exchanges with; must be symmetric across ranks
  int device = 0;          // CUDA device ordinal
  // Bound on joining the communicator plus the first exchange with every peer (Create).
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration peer_timeout = absl::Seconds(60);        // bound on each wait of a round
  absl::Duration idle_sleep = absl::Microseconds(50);     // first sleep after an idle round
  absl::Duration idle_sleep_max = absl::Milliseconds(2);  // idle sleeps double up to this
  int64_t max_message_bytes = int64_t{1} << 30;
};

class NcclTransport final : public Transport {
 public:
  // Joins the communicator and exchanges a first header with every peer (blocks until every
  // rank has called Create, at most connect_timeout: DeadlineExceeded naming the missing peer
  // ranks), then starts the thread.
  static absl::StatusOr<std::unique_ptr<NcclTransport>> Create(NcclTransportOptions options);
  // Drains queued sends (bounded by peer_timeout), stops the thread, finalizes and destroys the
  // communicator (aborts it if that does not finish within peer_timeout).
  ~NcclTransport() override;

  int rank() const override { return options_.rank; }
  absl::Status Send(int peer, Message message) override;
  absl::StatusOr<Message> Recv(int peer, const MessageKey& key, absl::Time deadline) override;
  absl::Status Flush(absl::Time deadline) override;
  TransportStats stats() const override;
  void Abort(absl::Status status) override;

  // Rounds run so far (header exchanges after the first), for tests of the idle backoff.
  int64_t rounds() const { return rounds_.load(); }

 private:
  // Thread-owned state of one peer link.
  // A staging buffer: device memory (stream-ordered on the transport's stream) or pinned host.
  struct Buffer {
    char* data = nullptr;
    int64_t capacity = 0;
  };
  struct PeerState {
    int rank = -1;
    bool done = false;  // a bye went either way: no more rounds with this peer
    Buffer send_dev, recv_dev, send_host, recv_host;
  };
  explicit NcclTransport(NcclTransportOptions options);
  absl::Status Init();
  void Loop();
  // One round with every peer; sets *moved when a payload moved either way.
  absl::Status Round(bool* moved);
  // Sends send[i] to and receives recv[i] from every peer i in `active`, one group; bounded by
  // `deadline`, past which it fails with `on_deadline`.
  absl::Status ExchangeHeaders(const std::vector<int>& active, const std::vector<FrameHeader>& send,
                               std::vector<FrameHeader>* recv, absl::Time deadline,
                               const std::function<absl::Status()>& on_deadline);
  // Ends a group and waits, polling, until the non-blocking communicator has taken it.
  absl::Status Group(const std::function<absl::Status()>& body, absl::Time deadline,
                     const std::function<absl::Status()>& on_deadline);
  // Polls ncclCommGetAsyncError until ncclSuccess (not ncclInProgress).
  absl::Status AwaitComm(absl::Time deadline, const std::function<absl::Status()>& on_deadline);
  // Records the event on the stream and polls it.
  absl::Status AwaitStream(absl::Time deadline, const std::function<absl::Status()>& on_deadline);
  // Cancelled after Abort(); the communicator's asynchronous error if it has one.
  absl::Status CheckHealthy();
  absl::Status GrowDevice(Buffer* buffer, int64_t bytes);
  absl::Status GrowHost(Buffer* buffer, int64_t bytes);
  // Peer ranks of `indices` (into peers_), for messages: "1, 3".
  std::string PeerRanks(const std::vector<int>& indices) const;
  void AbortComm();
  void FailAll(absl::Status status);
  int IndexOf(int peer) const {
    return peer >= 0 && peer < static_cast<int>(index_of_.size()) ? index_of_[peer] : -1;
  }

  const NcclTransportOptions options_;
  Mailbox mailbox_;
  std::vector<PeerState> peers_;  // one per entry of options_.peers; thread-owned
  std::vector<int> index_of_;     // rank -> index in peers_, -1 if not a peer

  // Owned by the thread once it runs (set up by Init before it starts).
  ncclComm_t comm_ = nullptr;
  void* stream_ = nullptr;       // cudaStream_t, kept opaque so users need not include CUDA headers
  void* event_ = nullptr;        // cudaEvent_t: completion of a round's copies
  char* header_dev_ = nullptr;   // 2 * peers headers: this rank's, then the peers'
  char* header_host_ = nullptr;  // pinned, the same layout
  std::thread thread_;
  std::atomic<int64_t> rounds_{0};

  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::deque<Message>> outboxes_ ABSL_GUARDED_BY(mu_);  // per peers_ index
  std::vector<bool> closed_ ABSL_GUARDED_BY(mu_);  // per peers_ index: bye exchanged
  bool wake_ ABSL_GUARDED_BY(mu_) = false;         // a Send since the thread last looked
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;        // messages in outboxes_, all peers
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;     // messages taken by the current round
  TransportStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> abort_requested_{false};
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_NCCL_TRANSPORT_H_
