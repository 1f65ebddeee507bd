// Mailbox: where received messages wait until the executor asks for them, per peer. Also holds
// each peer link's failure, so a Recv on a failed link returns at once. Shared by the TCP and
// fake transports.
//
// Thread-safety: thread-safe (one mutex; Take waits on a condition).
#ifndef PIPETRAIN_WORKER_TRANSPORT_MAILBOX_H_
#define PIPETRAIN_WORKER_TRANSPORT_MAILBOX_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/transport/message.h"

namespace pipetrain::worker {

class Mailbox {
 public:
  explicit Mailbox(int num_peers);

  // Stores a message from `peer`. A second message with the same key is a protocol error that
  // fails the link (the executor would otherwise consume the wrong tensor).
  void Put(int peer, Message message);
  // Marks the link to `peer` failed; waiting and later Takes return `status`. First error wins.
  void Fail(int peer, absl::Status status);
  // Fails every link (shutdown).
  void FailAll(absl::Status status);
  absl::Status LinkStatus(int peer) const;

  // Waits for the message with `key` from `peer` and removes it from the mailbox.
  absl::StatusOr<Message> Take(int peer, const MessageKey& key, absl::Time deadline);

 private:
  struct PeerBox {
    absl::flat_hash_map<MessageKey, Message> messages;
    absl::Status status;
  };
  mutable absl::Mutex mu_;
  std::vector<PeerBox> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_MAILBOX_H_
