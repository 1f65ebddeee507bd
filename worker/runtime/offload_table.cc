#include "worker/runtime/offload_table.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::worker {
namespace {

std::string Name(int stage, int microbatch) {
  return absl::StrCat("stage ", stage, " microbatch ", microbatch);
}

}  // namespace

absl::StatusOr<int64_t> OffloadTable::Offload(int stage, int microbatch,
                                              const std::vector<kernels::Tensor*>& slots,
                                              bool explicit_release) {
  if (entries_.contains(Key(stage, microbatch))) {
    return absl::FailedPreconditionError(
        absl::StrCat("offload of ", Name(stage, microbatch), ": already offloaded"));
  }
  PT_ASSIGN_OR_RETURN(std::shared_ptr<CopyTicket> ticket,
                      copier_->StartOffload(slots, absl::StrCat("offloaded activations of ",
                                                                Name(stage, microbatch))));
  const int64_t bytes = ticket->bytes();
  held_bytes_ += ticket->held_device_bytes();
  if (explicit_release) {
    awaiting_release_[Key(stage, microbatch)] = ticket;
  } else {
    unreleased_.push_back(ticket);
  }
  entries_[Key(stage, microbatch)] = Entry{State::kOffloaded, std::move(ticket)};
  return bytes;
}

absl::Status OffloadTable::Reload(int stage, int microbatch,
                                  const std::vector<kernels::Tensor*>& slots) {
  auto it = entries_.find(Key(stage, microbatch));
  if (it == entries_.end() || it->second.state != State::kOffloaded) {
    return absl::FailedPreconditionError(
        absl::StrCat("reload of ", Name(stage, microbatch), ": its activations are not offloaded"));
  }
  // With separate D2H/H2D threads the reload must not read the host copy before it is written.
  PT_ASSIGN_OR_RETURN(std::shared_ptr<CopyTicket> ticket,
                      copier_->StartReload(slots,
                                           absl::StrCat("reloaded activations of ",
                                                        Name(stage, microbatch)),
                                           it->second.ticket));
  it->second = Entry{State::kReloading, std::move(ticket)};
  return absl::OkStatus();
}

absl::Status OffloadTable::AwaitResident(int stage, int microbatch, const char* action) {
  auto it = entries_.find(Key(stage, microbatch));
  if (it == entries_.end()) return absl::OkStatus();
  if (it->second.state == State::kOffloaded) {
    return absl::FailedPreconditionError(
        absl::StrCat(action, " of ", Name(stage, microbatch),
                     " needs activations that are offloaded and were not reloaded"));
  }
  const std::shared_ptr<CopyTicket> ticket = std::move(it->second.ticket);
  entries_.erase(it);
  if (!ticket->done()) {
    const int64_t start = copier_->clock()->NowNs();
    absl::Status status = ticket->Wait();
    wait_ns_ += copier_->clock()->NowNs() - start;
    ++waits_;
    return status;
  }
  return ticket->Wait();
}

absl::StatusOr<int64_t> OffloadTable::Release(int stage, int microbatch) {
  auto it = awaiting_release_.find(Key(stage, microbatch));
  if (it == awaiting_release_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "release of ", Name(stage, microbatch), ": no offload copy waits for a RELEASE"));
  }
  const std::shared_ptr<CopyTicket> ticket = std::move(it->second);
  awaiting_release_.erase(it);
  if (!ticket->done()) {
    const int64_t start = copier_->clock()->NowNs();
    ticket->Wait().IgnoreError();  // the status is reported by Drain at the end of the step
    release_wait_ns_ += copier_->clock()->NowNs() - start;
  }
  const int64_t freed = copier_->ReleaseSource(*ticket);
  held_bytes_ -= freed;
  return freed;
}

int64_t OffloadTable::ReleaseAtComputeEnd() {
  int64_t freed = 0;
  for (auto& t : unreleased_) {
    if (!t->done()) {
      const int64_t start = copier_->clock()->NowNs();
      t->Wait().IgnoreError();  // the status is reported by Drain at the end of the step
      release_wait_ns_ += copier_->clock()->NowNs() - start;
    }
    freed += copier_->ReleaseSource(*t);
  }
  unreleased_.clear();
  held_bytes_ -= freed;
  return freed;
}

void OffloadTable::ReleaseAll() {
  for (auto& t : unreleased_) held_bytes_ -= copier_->ReleaseSource(*t);
  unreleased_.clear();
  for (auto& [key, t] : awaiting_release_) held_bytes_ -= copier_->ReleaseSource(*t);
  awaiting_release_.clear();
}

absl::Status OffloadTable::EndStep() {
  absl::Status status = copier_->Drain();
  ReleaseAll();
  if (!entries_.empty()) {
    const auto& [key, entry] = *entries_.begin();
    const int stage = static_cast<int>(key >> 32);
    const int mb = static_cast<int>(static_cast<uint32_t>(key));
    status = absl::FailedPreconditionError(
        absl::StrCat(entries_.size(), " offloaded stash(es) never went back to compute, e.g. ",
                     Name(stage, mb), entry.state == State::kOffloaded ? " (never reloaded)" : ""));
    entries_.clear();
  }
  return status;
}

}  // namespace pipetrain::worker
