// ActivationCopier: the worker's copy engine for OFFLOAD/RELOAD. One copy thread drains a FIFO
// of copy jobs, so copies run beside compute (the executor thread) and in issue order, exactly
// like the simulator's one-copy-engine-per-worker model (coordinator/schedule/engine.h).
//
// Ownership protocol (why the GptChunk, which is not thread-safe, is never touched off the
// executor thread). StartOffload/StartReload run on the executor thread and get the stash's
// tensor *slots* (Tensor* from GptChunk::ForEachStashedTensor, or a runner's own tensors):
//   OFFLOAD  for every device tensor in `slots`: allocate a host tensor (host allocator), move
//            the device Tensor object out of the slot into the job and put the host tensor in
//            the slot. The copy thread copies raw memory device -> host and then destroys the
//            device tensor, so the device bytes are physically freed when the copy completes.
//   RELOAD   for every host tensor in `slots`: allocate a device tensor (device allocator: a
//            clean ResourceExhausted naming the stash when over budget), swap it in, and the
//            copy thread copies host -> device, then frees the host tensor.
// The copy thread touches only (a) Tensor objects the job owns and (b) the raw bytes behind the
// slot's new tensor, never a Tensor object that lives in a stash. Nobody reads those bytes
// before the job's ticket is complete: the runner makes B/W/BW wait on the RELOAD ticket, and
// a RELOAD queued behind its OFFLOAD (FIFO) reads the host bytes only after they were written.
// Slot tensors must stay alive (not be Reset/destroyed) until their ticket completes; Drain()
// or the destructor finish every queued job first.
//
// Accounting that follows from the protocol (the runners report it, see stage runners):
//   - resident ("scheduled") activation bytes = device tensors in the stash slots. They drop
//     at the OFFLOAD action and rise at the RELOAD action, in the executor's action order. That
//     is the simulator's memory model with zero-cost copies (CostModel::offload = reload = 0).
//   - in-flight device bytes = device tensors owned by not-yet-finished OFFLOAD jobs; resident
//     + in flight is what the device allocator really holds (the simulator with offload > 0
//     models this: it releases at OFFLOAD's end = start + costs.offload).
//
// The raw copy is a function (CPU: memcpy; a CUDA backend plugs in cudaMemcpyAsync on a copy
// stream + a pinned host pool). An optional bandwidth cap (bytes/s) makes each job last at
// least bytes / bandwidth, to reproduce a PCIe-like regime on a CPU machine.
//
// Thread-safety: StartOffload/StartReload/Drain are called from one thread (the executor's);
// stats() and tickets are thread-safe.
#ifndef PIPETRAIN_WORKER_RUNTIME_ACTIVATION_COPIER_H_
#define PIPETRAIN_WORKER_RUNTIME_ACTIVATION_COPIER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace pipetrain::worker {

// Completion of one copy job. Status and times are written before done is notified.
class CopyTicket {
 public:
  // Blocks until the copy has finished; returns its status.
  absl::Status Wait() const {
    done_.WaitForNotification();
    return status_;
  }
  bool done() const { return done_.HasBeenNotified(); }
  int64_t bytes() const { return bytes_; }
  // steady_clock nanoseconds; valid once done().
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }

 private:
  friend class ActivationCopier;
  absl::Notification done_;
  absl::Status status_;
  int64_t bytes_ = 0;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
};

struct ActivationCopierOptions {
  // 0 = unlimited; otherwise each job takes at least bytes / bandwidth seconds.
  double bandwidth_bytes_per_s = 0;
  // Raw copy of `bytes` from src to dst (different memory kinds). Defaults to memcpy (CPU
  // backend: host RAM on both sides). Runs on the copy thread.
  std::function<absl::Status(float* dst, const float* src, int64_t bytes)> raw_copy;
};

struct CopierStats {
  int64_t jobs = 0;
  int64_t offloaded_bytes = 0;
  int64_t reloaded_bytes = 0;
  int64_t in_flight_device_bytes = 0;  // device bytes of unfinished OFFLOAD jobs, right now
};

class ActivationCopier {
 public:
  // `backend` provides the allocators (thread-safe) and must outlive the copier.
  ActivationCopier(kernels::Backend* backend, ActivationCopierOptions options = {});
  // Finishes every queued job, then stops the copy thread.
  ~ActivationCopier();
  ActivationCopier(const ActivationCopier&) = delete;
  ActivationCopier& operator=(const ActivationCopier&) = delete;

  // See the file comment. Slots that are empty or already on the target side are skipped. On an
  // allocation error nothing is changed and nothing is queued.
  absl::StatusOr<std::shared_ptr<CopyTicket>> StartOffload(absl::Span<kernels::Tensor* const> slots,
                                                           absl::string_view what);
  absl::StatusOr<std::shared_ptr<CopyTicket>> StartReload(absl::Span<kernels::Tensor* const> slots,
                                                          absl::string_view what);
  // Waits until every queued job has finished; returns the first copy error since the last
  // Drain (or OK).
  absl::Status Drain();

  CopierStats stats() const;

 private:
  struct Segment {
    const float* src;
    float* dst;
    int64_t bytes;
  };
  struct Job {
    bool offload = false;
    std::vector<Segment> segments;
    std::vector<kernels::Tensor> release_after;  // freed on the copy thread once copied
    std::shared_ptr<CopyTicket> ticket;
  };

  absl::StatusOr<std::shared_ptr<CopyTicket>> Start(absl::Span<kernels::Tensor* const> slots,
                                                    bool offload, absl::string_view what);
  void Loop();
  absl::Status RunJob(Job& job);

  kernels::Backend* const backend_;
  const ActivationCopierOptions options_;

  mutable absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;  // jobs popped and not yet finished
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  CopierStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;  // last: starts after every member above is initialised
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_ACTIVATION_COPIER_H_
