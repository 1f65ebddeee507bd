// FakeTransportHub: an in-process transport for unit tests. Every endpoint shares one hub;
// Send hands the message to the receiver's mailbox (after an optional delay, on a thread so the
// sender never blocks). Faults can be injected: a delay on every message, dropping or corrupting
// the next message that matches a key, or killing a rank (its links fail as a lost TCP peer's
// would). Corruption is detected by the same checksum the TCP transport uses.
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_WORKER_TRANSPORT_FAKE_TRANSPORT_H_
#define PIPETRAIN_WORKER_TRANSPORT_FAKE_TRANSPORT_H_

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/transport/mailbox.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

class FakeTransportHub {
 public:
  explicit FakeTransportHub(int num_ranks);
  ~FakeTransportHub();

  // The endpoint of `rank`; owned by the hub.
  Transport* endpoint(int rank);

  void set_delay(absl::Duration delay);
  void DropNext(const MessageKey& key);
  void CorruptNext(const MessageKey& key);
  // Rank `rank` disappears: every link to it fails with Unavailable.
  void Kill(int rank);

 private:
  class Endpoint;
  struct InFlight {
    int from;
    int to;
    Message message;
    uint64_t checksum;
  };
  void Deliver(InFlight item);

  const int num_ranks_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  absl::Mutex mu_;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_);
  std::optional<MessageKey> drop_ ABSL_GUARDED_BY(mu_);
  std::optional<MessageKey> corrupt_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> dead_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_FAKE_TRANSPORT_H_
