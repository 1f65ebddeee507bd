#include "worker/runtime/activation_copier.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status Memcpy(float* dst, const float* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

}  // namespace

ActivationCopier::ActivationCopier(kernels::Backend* backend, ActivationCopierOptions options)
    : backend_(backend), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

ActivationCopier::~ActivationCopier() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::StatusOr<std::shared_ptr<CopyTicket>> ActivationCopier::StartOffload(
    absl::Span<kernels::Tensor* const> slots, absl::string_view what) {
  return Start(slots, /*offload=*/true, what);
}

absl::StatusOr<std::shared_ptr<CopyTicket>> ActivationCopier::StartReload(
    absl::Span<kernels::Tensor* const> slots, absl::string_view what) {
  return Start(slots, /*offload=*/false, what);
}

absl::StatusOr<std::shared_ptr<CopyTicket>> ActivationCopier::Start(
    absl::Span<kernels::Tensor* const> slots, bool offload, absl::string_view what) {
  const kernels::Location from = offload ? kernels::Location::kDevice : kernels::Location::kHost;
  kernels::CountingAllocator& target =
      offload ? backend_->host_allocator() : backend_->device_allocator();
  // Allocate every destination first so a failure leaves the slots untouched.
  std::vector<kernels::Tensor*> moving;
  std::vector<kernels::Tensor> destinations;
  for (kernels::Tensor* slot : slots) {
    if (slot == nullptr || slot->empty() || slot->location() != from) continue;
    absl::StatusOr<kernels::Tensor> dst = target.Allocate(slot->shape(), what);
    if (!dst.ok()) return dst.status();
    moving.push_back(slot);
    destinations.push_back(*std::move(dst));
  }
  Job job;
  job.offload = offload;
  job.ticket = std::make_shared<CopyTicket>();
  for (size_t i = 0; i < moving.size(); ++i) {
    kernels::Tensor* slot = moving[i];
    job.segments.push_back({slot->data(), destinations[i].data(), slot->bytes()});
    job.ticket->bytes_ += slot->bytes();
    job.release_after.push_back(std::move(*slot));
    *slot = std::move(destinations[i]);
  }
  std::shared_ptr<CopyTicket> ticket = job.ticket;
  absl::MutexLock lock(&mu_);
  ++stats_.jobs;
  if (offload) {
    stats_.offloaded_bytes += ticket->bytes_;
    stats_.in_flight_device_bytes += ticket->bytes_;
  } else {
    stats_.reloaded_bytes += ticket->bytes_;
  }
  queue_.push_back(std::move(job));
  return ticket;
}

absl::Status ActivationCopier::RunJob(Job& job) {
  const auto start = std::chrono::steady_clock::now();
  const auto& copy = options_.raw_copy ? options_.raw_copy : Memcpy;
  for (const Segment& s : job.segments) {
    if (absl::Status status = copy(s.dst, s.src, s.bytes); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat(job.offload ? "offload" : "reload",
                                                      " copy failed: ", status.message()));
    }
  }
  if (options_.bandwidth_bytes_per_s > 0) {
    const double seconds = static_cast<double>(job.ticket->bytes_) / options_.bandwidth_bytes_per_s;
    std::this_thread::sleep_until(start +
                                  std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9)));
  }
  return absl::OkStatus();
}

void ActivationCopier::Loop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ActivationCopier* self) { return self->stop_ || !self->queue_.empty(); }, this));
      if (queue_.empty()) return;  // stop_ and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    CopyTicket& ticket = *job.ticket;
    ticket.start_ns_ = NowNs();
    ticket.status_ = RunJob(job);
    // The source side is freed only now: for OFFLOAD these are the device bytes.
    job.release_after.clear();
    ticket.end_ns_ = NowNs();
    absl::MutexLock lock(&mu_);
    if (job.offload) stats_.in_flight_device_bytes -= ticket.bytes_;
    if (!ticket.status_.ok() && first_error_.ok()) first_error_ = ticket.status_;
    ticket.done_.Notify();  // before running_ drops, so a drained copier has only done tickets
    --running_;
  }
}

absl::Status ActivationCopier::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ActivationCopier* self) { return self->queue_.empty() && self->running_ == 0; }, this));
  absl::Status status = first_error_;
  first_error_ = absl::OkStatus();
  return status;
}

CopierStats ActivationCopier::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace pipetrain::worker
