#include "worker/transport/fake_transport.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

class FakeTransportHub::Endpoint final : public Transport {
 public:
  Endpoint(FakeTransportHub* hub, int rank) : hub_(hub), rank_(rank), mailbox(hub->num_ranks_) {}

  int rank() const override { return rank_; }

  absl::Status Send(int peer, Message message) override {
    if (peer < 0 || peer >= hub_->num_ranks_ || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("no link from rank ", rank_, " to ", peer));
    }
    if (absl::Status s = mailbox.LinkStatus(peer); !s.ok()) return s;
    sent_bytes += message.bytes();
    ++sent_messages;
    uint64_t checksum = PayloadChecksum(message.data);
    hub_->Deliver(InFlight{rank_, peer, std::move(message), checksum});
    return absl::OkStatus();
  }

  absl::StatusOr<Message> Recv(int peer, const MessageKey& key, absl::Time deadline) override {
    if (peer < 0 || peer >= hub_->num_ranks_ || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("no link from rank ", rank_, " to ", peer));
    }
    absl::StatusOr<Message> message = mailbox.Take(peer, key, deadline);
    if (message.ok()) {
      received_bytes += message->bytes();
      ++received_messages;
    }
    return message;
  }

  absl::Status Flush(absl::Time) override { return absl::OkStatus(); }
  void Abort(absl::Status status) override { mailbox.FailAll(std::move(status)); }

  TransportStats stats() const override {
    return TransportStats{sent_bytes.load(), received_bytes.load(), sent_messages.load(),
                          received_messages.load()};
  }

 private:
  FakeTransportHub* hub_;
  const int rank_;

 public:
  Mailbox mailbox;
  std::atomic<int64_t> sent_bytes{0}, received_bytes{0}, sent_messages{0}, received_messages{0};
};

FakeTransportHub::FakeTransportHub(int num_ranks)
    : num_ranks_(num_ranks), delay_(absl::ZeroDuration()), dead_(num_ranks, false) {
  for (int r = 0; r < num_ranks; ++r) endpoints_.push_back(std::make_unique<Endpoint>(this, r));
}

FakeTransportHub::~FakeTransportHub() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

Transport* FakeTransportHub::endpoint(int rank) { return endpoints_[rank].get(); }

void FakeTransportHub::set_delay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}
void FakeTransportHub::DropNext(const MessageKey& key) {
  absl::MutexLock lock(&mu_);
  drop_ = key;
}
void FakeTransportHub::CorruptNext(const MessageKey& key) {
  absl::MutexLock lock(&mu_);
  corrupt_ = key;
}

void FakeTransportHub::Kill(int rank) {
  {
    absl::MutexLock lock(&mu_);
    dead_[rank] = true;
  }
  for (int r = 0; r < num_ranks_; ++r) {
    if (r == rank) continue;
    endpoints_[r]->mailbox.Fail(
        rank, absl::UnavailableError(absl::StrCat("lost rank ", rank, ": connection closed")));
  }
  endpoints_[rank]->mailbox.FailAll(absl::CancelledError("this rank was killed"));
}

void FakeTransportHub::Deliver(InFlight item) {
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    if (dead_[item.from] || dead_[item.to]) return;
    if (drop_ && *drop_ == item.message.key) {
      drop_.reset();
      return;
    }
    if (corrupt_ && *corrupt_ == item.message.key && !item.message.data.empty()) {
      corrupt_.reset();
      item.message.data[item.message.data.size() / 2] += 1.0f;  // a bit flip in transit
    }
    delay = delay_;
  }
  auto deliver = [this, delay](InFlight in) {
    if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
    Mailbox& box = endpoints_[in.to]->mailbox;
    if (PayloadChecksum(in.message.data) != in.checksum) {
      box.Fail(in.from, absl::DataLossError(absl::StrCat("corrupted tensor from rank ", in.from,
                                                         " (", ToString(in.message.key),
                                                         "): checksum mismatch")));
      return;
    }
    box.Put(in.from, std::move(in.message));
  };
  if (delay <= absl::ZeroDuration()) {
    deliver(std::move(item));
    return;
  }
  absl::MutexLock lock(&mu_);
  threads_.emplace_back(deliver, std::move(item));
}

}  // namespace pipetrain::worker
