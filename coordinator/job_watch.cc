#include "coordinator/job_watch.h"

namespace pipetrain::coordinator {

JobWatch::Result JobWatch::Next(absl::Duration timeout, v1::JobEvent* event) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !events_.empty() || ended_ || closed_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (closed_) return Result::kEnded;
  if (!events_.empty()) {
    *event = std::move(events_.front());
    events_.pop_front();
    return Result::kEvent;
  }
  return ended_ ? Result::kEnded : Result::kTimeout;
}

void JobWatch::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  events_.clear();
}

bool JobWatch::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

void JobWatch::Push(const v1::JobEvent& event) {
  absl::MutexLock lock(&mu_);
  if (!closed_ && !ended_) events_.push_back(event);
}

void JobWatch::End() {
  absl::MutexLock lock(&mu_);
  ended_ = true;
}

}  // namespace pipetrain::coordinator
