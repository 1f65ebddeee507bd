// NcclTransport: the Transport (transport.h) of the CUDA build, over NCCL point-to-point
// (ncclSend/ncclRecv) on one communicator spanning the job's ranks. Built only with
// PIPETRAIN_ENABLE_CUDA.
//
// Bootstrap: one rank (the coordinator, or for now whoever writes the plan file) creates an
// ncclUniqueId with NewNcclUniqueId(); its bytes travel in PrepareRequest.nccl_unique_id
// (proto/pipetrain/v1/worker.proto) and every rank passes them to Create, which blocks in
// ncclCommInitRank until all `world_size` ranks have joined.
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
// same round cannot deadlock. Received messages are checked (size, checksum: DataLoss on a
// mismatch, never consumed) and put in a Mailbox in arrival order; Recv takes them by key from
// there, exactly as with TCP. At most one message per peer and direction moves per round,
// preserving per-peer order. An idle round (nothing moved) is followed by a short sleep.
// Shutdown: the destructor drains the queues, then sends a "bye" header; both sides drop the
// pair from later rounds after the round that carried a bye (so the lock-step stays matched),
// and a later Send to that peer fails with Unavailable, like TCP's goodbye frame.
//
// Staging: the executor speaks host Messages today (std::vector<float>), so each payload is
// copied host -> device buffer before ncclSend and device -> host after ncclRecv, on the
// transport's own CUDA stream. Staging buffers are per peer and grow to the largest message.
// A device-tensor path (no staging) is the obvious next step once the executor hands device
// tensors to the transport.
//
// Failure: every wait on the stream polls with a bound (options.peer_timeout) and checks
// ncclCommGetAsyncError; a peer that vanished therefore fails all links with Unavailable within
// peer_timeout (the communicator is aborted: NCCL cannot tell which peer died). Abort() does the
// same at once with the given status.
//
// Thread-safety: thread-safe (Transport contract). One internal thread owns the communicator,
// the stream and the device buffers; public methods only touch the queues and the mailbox.
#ifndef PIPETRAIN_WORKER_TRANSPORT_NCCL_TRANSPORT_H_
#define PIPETRAIN_WORKER_TRANSPORT_NCCL_TRANSPORT_H_

#include <nccl.h>

#include <atomic>
#include <deque>
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
#include "worker/transport/mailbox.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

// A fresh ncclUniqueId, serialized (sizeof(ncclUniqueId) = NCCL_UNIQUE_ID_BYTES bytes).
absl::StatusOr<std::string> NewNcclUniqueId();
std::string SerializeNcclUniqueId(const ncclUniqueId& id);
// InvalidArgument unless `bytes` is exactly NCCL_UNIQUE_ID_BYTES long.
absl::StatusOr<ncclUniqueId> ParseNcclUniqueId(absl::string_view bytes);

struct NcclTransportOptions {
  int rank = 0;
  int world_size = 1;
  std::string unique_id;   // SerializeNcclUniqueId bytes, the same on every rank
  std::vector<int> peers;  // ranks this one exchanges with; must be symmetric across ranks
  int device = 0;          // CUDA device ordinal
  absl::Duration peer_timeout = absl::Seconds(60);  // bound on one round's wait
  absl::Duration idle_sleep = absl::Microseconds(50);
  int64_t max_message_bytes = int64_t{1} << 30;
};

class NcclTransport final : public Transport {
 public:
  // Joins the communicator (blocks until every rank has called Create) and starts the thread.
  static absl::StatusOr<std::unique_ptr<NcclTransport>> Create(NcclTransportOptions options);
  // Drains queued sends (bounded by peer_timeout), stops the thread, destroys the communicator.
  ~NcclTransport() override;

  int rank() const override { return options_.rank; }
  absl::Status Send(int peer, Message message) override;
  absl::StatusOr<Message> Recv(int peer, const MessageKey& key, absl::Time deadline) override;
  absl::Status Flush(absl::Time deadline) override;
  TransportStats stats() const override;
  void Abort(absl::Status status) override;

 private:
  // Thread-owned state of one peer link.
  struct PeerState {
    int rank = -1;
    bool done = false;  // a bye went either way: no more rounds with this peer
    char* send_buf = nullptr;
    int64_t send_capacity = 0;
    char* recv_buf = nullptr;
    int64_t recv_capacity = 0;
  };
  explicit NcclTransport(NcclTransportOptions options);
  absl::Status Init();
  void Loop();
  // One round with every peer; sets *moved when a payload moved either way.
  absl::Status Round(bool* moved);
  absl::Status WaitStream(absl::string_view what);
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
  void* stream_ = nullptr;      // cudaStream_t, kept opaque so users need not include CUDA headers
  char* header_dev_ = nullptr;  // 2 * peers headers: this rank's, then the peers'
  std::thread thread_;

  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::deque<Message>> outboxes_ ABSL_GUARDED_BY(mu_);  // per peers_ index
  std::vector<bool> closed_ ABSL_GUARDED_BY(mu_);  // per peers_ index: bye exchanged
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;        // messages in outboxes_, all peers
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;     // messages taken by the current round
  TransportStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> abort_requested_{false};
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_NCCL_TRANSPORT_H_
