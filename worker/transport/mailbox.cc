#include "worker/transport/mailbox.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

Mailbox::Mailbox(int num_peers) : peers_(num_peers) {}

void Mailbox::Put(int peer, Message message) {
  absl::MutexLock lock(&mu_);
  PeerBox& box = peers_[peer];
  if (!box.status.ok()) return;
  const MessageKey key = message.key;
  auto [it, inserted] = box.messages.try_emplace(key, std::move(message));
  if (!inserted) {
    box.status = absl::DataLossError(
        absl::StrCat("duplicate message from rank ", peer, ": ", ToString(key)));
  }
}

void Mailbox::Fail(int peer, absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (peers_[peer].status.ok()) peers_[peer].status = std::move(status);
}

void Mailbox::FailAll(absl::Status status) {
  absl::MutexLock lock(&mu_);
  for (PeerBox& box : peers_) {
    if (box.status.ok()) box.status = status;
  }
}

absl::Status Mailbox::LinkStatus(int peer) const {
  absl::MutexLock lock(&mu_);
  return peers_[peer].status;
}

absl::StatusOr<Message> Mailbox::Take(int peer, const MessageKey& key, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  PeerBox& box = peers_[peer];
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !box.status.ok() || box.messages.contains(key);
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  // A message that arrived before the link failed is still good to consume.
  auto it = box.messages.find(key);
  if (it != box.messages.end()) {
    Message message = std::move(it->second);
    box.messages.erase(it);
    return message;
  }
  if (!box.status.ok()) return box.status;
  return absl::DeadlineExceededError(
      absl::StrCat("timed out waiting for ", ToString(key), " from rank ", peer));
}

}  // namespace pipetrain::worker
