// Transport: moves activation and gradient messages between the workers of one pipeline.
//
// Semantics shared by every implementation (TCP, fake, NCCL):
// - Send queues the message and returns at once; a sender thread does the copy, so compute is
//   never blocked by a send. Messages to one peer are delivered in order.
// - Recv blocks until the message with that key from that peer has arrived, the deadline
//   passes (DeadlineExceeded), or the link to the peer has failed (Unavailable / DataLoss).
//   Messages may arrive before they are asked for; they wait in a mailbox.
// - A corrupted or mis-sized message is never handed out: the link fails with DataLoss.
// - Once a link fails, every later Send/Recv on it fails at once with the same error.
//
// Thread-safety: all methods are thread-safe.
#ifndef PIPETRAIN_WORKER_TRANSPORT_TRANSPORT_H_
#define PIPETRAIN_WORKER_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/transport/message.h"

namespace pipetrain::worker {

struct TransportStats {
  int64_t sent_bytes = 0;      // payload bytes handed to the wire
  int64_t received_bytes = 0;  // payload bytes accepted from the wire
  int64_t sent_messages = 0;
  int64_t received_messages = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual absl::Status Send(int peer, Message message) = 0;
  virtual absl::StatusOr<Message> Recv(int peer, const MessageKey& key, absl::Time deadline) = 0;
  // Blocks until every queued send has been written out (or failed).
  virtual absl::Status Flush(absl::Time deadline) = 0;
  virtual TransportStats stats() const = 0;
  // Fails every link with `status` (e.g. Cancelled when the job is aborted): pending and later
  // Recv/Send return it at once. Irreversible.
  virtual void Abort(absl::Status status) = 0;
  // Gives a received message's storage back for reuse by later receives (optional): in a
  // steady-state pipeline the same tensor sizes recur, so this saves zero-filling and
  // page-faulting a fresh buffer for every message.
  virtual void Recycle(std::vector<float> buffer) { (void)buffer; }
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_TRANSPORT_H_
