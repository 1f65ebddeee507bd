#include "worker/runtime/activation_copier.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

ActivationCopierOptions BackendCopierOptions(double bandwidth_bytes_per_s) {
  ActivationCopierOptions options;
  options.bandwidth_bytes_per_s = bandwidth_bytes_per_s;
  return options;
}

absl::Status CopyTicket::Wait() const {
  done_.WaitForNotification();
  clock_->SleepUntilNs(ready_ns_);
  return status_;
}

bool CopyTicket::done() const {
  return done_.HasBeenNotified() && clock_->NowNs() >= ready_ns_;
}

ActivationCopier::ActivationCopier(kernels::Backend* backend, ActivationCopierOptions options)
    : backend_(backend), options_(std::move(options)) {
  for (int lane = 0; lane < (options_.duplex ? 2 : 1); ++lane) {
    engines_[lane] = options_.raw_copy ? nullptr : backend_->NewCopyEngine();
  }
  threads_.emplace_back([this] { Loop(0); });
  if (options_.duplex) threads_.emplace_back([this] { Loop(1); });
}

ActivationCopier::~ActivationCopier() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

absl::StatusOr<std::shared_ptr<CopyTicket>> ActivationCopier::StartOffload(
    absl::Span<kernels::Tensor* const> slots, absl::string_view what) {
  return Start(slots, /*offload=*/true, what, nullptr);
}

absl::StatusOr<std::shared_ptr<CopyTicket>> ActivationCopier::StartReload(
    absl::Span<kernels::Tensor* const> slots, absl::string_view what,
    std::shared_ptr<CopyTicket> after) {
  return Start(slots, /*offload=*/false, what, std::move(after));
}

int64_t ActivationCopier::ReleaseSource(CopyTicket& ticket) {
  const int64_t bytes = ticket.held_bytes_;
  if (bytes == 0 && ticket.held_.empty()) return 0;
  ticket.Wait().IgnoreError();  // the copy must have read the bytes; its status is reported
  ticket.held_.clear();         // elsewhere (Drain, the reload's ticket)
  ticket.held_bytes_ = 0;
  absl::MutexLock lock(&mu_);
  stats_.in_flight_device_bytes -= bytes;
  return bytes;
}

absl::StatusOr<std::shared_ptr<CopyTicket>> ActivationCopier::Start(
    absl::Span<kernels::Tensor* const> slots, bool offload, absl::string_view what,
    std::shared_ptr<CopyTicket> after) {
  const kernels::Location from = offload ? kernels::Location::kDevice : kernels::Location::kHost;
  kernels::CountingAllocator& target =
      offload ? backend_->host_allocator() : backend_->device_allocator();
  // Allocate every destination first so a failure leaves the slots untouched.
  std::vector<kernels::Tensor*> moving;
  std::vector<kernels::Tensor> destinations;
  for (kernels::Tensor* slot : slots) {
    if (slot == nullptr || slot->empty() || slot->location() != from) continue;
    absl::StatusOr<kernels::Tensor> dst = target.Allocate(slot->shape(), what, slot->dtype());
    if (!dst.ok()) return dst.status();
    moving.push_back(slot);
    destinations.push_back(*std::move(dst));
  }
  Job job;
  job.offload = offload;
  // After the destinations' allocation: the copy must follow both the compute that produced the
  // source and (stream-ordered device memory) the allocation of a reload's destination.
  if (!options_.raw_copy && !moving.empty()) {
    if (!engines_[LaneOf(offload)].ok()) return engines_[LaneOf(offload)].status();
    absl::StatusOr<std::unique_ptr<kernels::CopyFence>> fence =
        (*engines_[LaneOf(offload)])->FenceCompute();
    if (!fence.ok()) return fence.status();
    job.fence = *std::move(fence);
  }
  job.ticket = std::shared_ptr<CopyTicket>(new CopyTicket(options_.clock));
  job.after = std::move(after);
  for (size_t i = 0; i < moving.size(); ++i) {
    kernels::Tensor* slot = moving[i];
    job.segments.push_back({slot->data(), destinations[i].data(), slot->bytes()});
    job.ticket->bytes_ += slot->bytes();
    if (offload) {
      job.ticket->held_.push_back(std::move(*slot));  // device copy: released by ReleaseSource
    } else {
      job.release_after.push_back(std::move(*slot));  // host copy: freed by the copy thread
    }
    *slot = std::move(destinations[i]);
  }
  if (offload) job.ticket->held_bytes_ = job.ticket->bytes_;
  std::shared_ptr<CopyTicket> ticket = job.ticket;
  absl::MutexLock lock(&mu_);
  Lane& lane = lanes_[LaneOf(offload)];
  int64_t begin = std::max(options_.clock->NowNs(), lane.ready_ns);
  if (job.after) begin = std::max(begin, job.after->ready_ns_);  // set at its issue, immutable
  ticket->ready_ns_ =
      begin + (options_.bandwidth_bytes_per_s > 0
                   ? static_cast<int64_t>(static_cast<double>(ticket->bytes_) /
                                          options_.bandwidth_bytes_per_s * 1e9)
                   : 0);
  lane.ready_ns = ticket->ready_ns_;
  ++stats_.jobs;
  if (offload) {
    stats_.offloaded_bytes += ticket->bytes_;
    stats_.in_flight_device_bytes += ticket->bytes_;
  } else {
    stats_.reloaded_bytes += ticket->bytes_;
  }
  lane.queue.push_back(std::move(job));
  return ticket;
}

absl::Status ActivationCopier::RunJob(int lane, Job& job) {
  absl::Status status;
  if (options_.raw_copy) {
    for (const kernels::CopySegment& s : job.segments) {
      status =
          options_.raw_copy(static_cast<float*>(s.dst), static_cast<const float*>(s.src), s.bytes);
      if (!status.ok()) break;
    }
  } else if (!job.segments.empty() && !engines_[lane].ok()) {
    status = engines_[lane].status();
  } else if (!job.segments.empty()) {
    const kernels::CopyDirection direction = job.offload ? kernels::CopyDirection::kDeviceToHost
                                                         : kernels::CopyDirection::kHostToDevice;
    status = (*engines_[lane])->Copy(job.fence.get(), direction, job.segments);
  }
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(job.offload ? "offload" : "reload",
                                                  " copy failed: ", status.message()));
}

void ActivationCopier::Loop(int lane_index) {
  Lane& lane = lanes_[lane_index];
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !lane.queue.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (lane.queue.empty()) return;  // stop_ and drained
      job = std::move(lane.queue.front());
      lane.queue.pop_front();
      ++lane.running;
    }
    CopyTicket& ticket = *job.ticket;
    // The OFFLOAD's bytes must be on the host before they are read back; its link time is
    // already in this job's ready time.
    absl::Status after = absl::OkStatus();
    if (job.after) {
      job.after->done_.WaitForNotification();
      after = job.after->status_;
    }
    ticket.start_ns_ = options_.clock->NowNs();
    ticket.status_ = after.ok() ? RunJob(lane_index, job) : after;
    job.fence.reset();
    job.release_after.clear();  // RELOAD: the host copy
    // Bytes copied and the link done.
    ticket.end_ns_ = std::max(options_.clock->NowNs(), ticket.ready_ns_);
    {
      absl::MutexLock lock(&mu_);
      if (!ticket.status_.ok() && first_error_.ok()) first_error_ = ticket.status_;
      ticket.done_.Notify();  // before running drops, so a drained copier has only done tickets
    }
    // This lane's reference goes before running drops too: an offload ticket nobody else holds
    // frees its device source here, and Drain's caller must see that memory back (it used to be
    // freed just after Drain returned, now and then, under load).
    job = Job();
    absl::MutexLock lock(&mu_);
    --lane.running;
  }
}

absl::Status ActivationCopier::Drain() {
  absl::Status status;
  int64_t ready = 0;
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const Lane& l : lanes_) {
        if (!l.queue.empty() || l.running != 0) return false;
      }
      return true;
    };
    mu_.Await(absl::Condition(&idle));
    for (const Lane& l : lanes_) ready = std::max(ready, l.ready_ns);
    status = first_error_;
    first_error_ = absl::OkStatus();
  }
  options_.clock->SleepUntilNs(ready);  // the link delivers what it was given
  return status;
}

CopierStats ActivationCopier::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace pipetrain::worker
