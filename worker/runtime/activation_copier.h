// ActivationCopier: the worker's copy engines for OFFLOAD/RELOAD. A D2H copy thread and an H2D
// copy thread (one shared thread when not duplex) each drain a FIFO of copy jobs, so copies run
// beside compute (the executor thread), one at a time per direction and in issue order, exactly
// like the simulator's copy engines (schedule/engine.h). A RELOAD job given the
// ticket of its stash's OFFLOAD starts its copy only after that one has finished.
//
// Ownership protocol (why the GptChunk, which is not thread-safe, is never touched off the
// executor thread). StartOffload/StartReload run on the executor thread and get the stash's
// tensor *slots* (Tensor* from GptChunk::ForEachStashedTensor, or a runner's own tensors):
//   OFFLOAD  for every device tensor in `slots`: allocate a host tensor (host allocator), move
//            the device Tensor object out of the slot into the ticket and put the host tensor in
//            the slot. The copy thread copies raw memory device -> host. The device tensors stay
//            with the ticket until ReleaseSource (executor thread, after the copy is done).
//   RELOAD   for every host tensor in `slots`: allocate a device tensor (device allocator: a
//            clean ResourceExhausted naming the stash when over budget), swap it in, and the
//            copy thread copies host -> device, then frees the host tensor.
// The copy threads touch only (a) Tensor objects a job owns and (b) raw bytes behind tensors,
// never a Tensor object that lives in a stash or a ticket. Nobody reads a destination before the
// job's ticket is complete: the runner makes B/W/BW wait on the RELOAD ticket.
// Slot tensors must stay alive (not be Reset/destroyed) until their ticket completes; Drain()
// or the destructor finish every queued job first.
//
// When device bytes come back (the memory model the simulator predicts, cost_model.h): at the
// end of the next compute action after an OFFLOAD the runner waits for that copy (if it is
// still running) and frees the device copy (OffloadTable::ReleaseAtComputeEnd). A device buffer
// being read by a D2H copy cannot be reused before the host has seen the copy finish, so some
// release point is needed; pinning it to the next compute end makes device memory a function of
// action order alone: a worker's activation bytes = resident stashes + offloaded-but-unreleased
// copies, rising at F and at RELOAD (its issue), falling at B/W/BW and at compute ends. Measured
// peaks then equal the simulator's whatever the link speed or machine load (releasing as soon
// as a copy is seen done would make the peak depend on thread timing). The cost: a copy longer
// than the next compute stalls the worker; the simulator charges that stall and the offload
// pass books copies so it does not happen.
//
// The raw copy is the backend's (kernels/copy_engine.h): each copy thread gets its own
// kernels::CopyEngine from Backend::NewCopyEngine (CPU: memcpy; CUDA: a copy stream of its own,
// so D2H and H2D copies run on separate streams when duplex, and pinned host memory). At issue,
// on the executor thread and after the destination has been allocated, the job takes a fence
// from the engine (CUDA: an event on the compute stream, after the kernels that produced an
// offloaded stash and after the stream-ordered allocation of a reload's destination); the copy
// thread's engine waits for it on the device, copies, and finishes the ticket only once the
// bytes are there. Tests may replace the copy with ActivationCopierOptions::raw_copy.
//
// An optional bandwidth cap (bytes/s, per direction) reproduces a PCIe-like regime on a CPU
// machine: each lane is a link that moves one job at a time in issue order, and a job's
// completion time is fixed when it is issued, ready = max(issue, the lane's previous job ready,
// for a RELOAD its OFFLOAD's ready) + bytes / bandwidth, exactly the simulator's copy engine. A
// ticket is done once its bytes are copied and its ready time has passed; the copy thread only
// moves bytes. Timing the link on the copy thread instead (copy, then sleep out the rest) made a
// copy's end depend on when the OS ran that thread: woken next to a busy compute thread it often
// waited for the compute action to end (measured: a 0.96 ms copy issued before a 0.8 ms compute
// done after 1.8 ms about half the time, idle machine).
//
// Thread-safety: StartOffload/StartReload/ReleaseSource/Drain are called from one thread (the
// executor's); stats() and tickets' accessors are thread-safe.
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
#include "common/clock.h"
#include "kernels/backend.h"
#include "kernels/copy_engine.h"
#include "kernels/tensor.h"

namespace pipetrain::worker {

// Completion of one copy job. Status and times are written before done is notified.
class CopyTicket {
 public:
  // Blocks until the copy has finished (bytes copied, and the link's ready time passed);
  // returns its status.
  absl::Status Wait() const;
  bool done() const;
  int64_t bytes() const { return bytes_; }
  // Clock nanoseconds (ActivationCopierOptions::clock), valid once done(): when the copy thread
  // began the raw copy, and
  // when the job finished (bytes copied and the link's ready time reached). Uncapped, the
  // raw copy's own window.
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }
  // Clock nanoseconds at which the (bandwidth-capped) link delivers it; set at issue.
  int64_t ready_ns() const { return ready_ns_; }
  // Device bytes an OFFLOAD still holds (until ActivationCopier::ReleaseSource).
  int64_t held_device_bytes() const { return held_bytes_; }

 private:
  friend class ActivationCopier;
  explicit CopyTicket(const Clock* clock) : clock_(clock) {}
  const Clock* clock_;
  std::vector<kernels::Tensor> held_;  // OFFLOAD: the device copies (executor thread only)
  int64_t held_bytes_ = 0;
  absl::Notification done_;
  absl::Status status_;
  int64_t bytes_ = 0;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  int64_t ready_ns_ = 0;
};

struct ActivationCopierOptions {
  // 0 = unlimited; otherwise each lane delivers bytes / bandwidth seconds per job, in order.
  double bandwidth_bytes_per_s = 0;
  // Replaces the backend's copy engine (no fence): a raw copy of `bytes` from src to dst, run on
  // the copy thread. Unset (the default): the backend's engines (Backend::NewCopyEngine).
  std::function<absl::Status(float* dst, const float* src, int64_t bytes)> raw_copy;
  // Separate D2H and H2D copy threads (both directions at once); false = one shared FIFO.
  bool duplex = true;
  // Times the copies and the capped link's delivery; never null.
  const Clock* clock = Clock::Real();
};

// What the stage runners use: the backend's copy engines (no raw_copy; CUDA: its copy streams),
// duplex, the real clock, and a link cap of `bandwidth_bytes_per_s` (0 = none).
ActivationCopierOptions BackendCopierOptions(double bandwidth_bytes_per_s);

struct CopierStats {
  int64_t jobs = 0;
  int64_t offloaded_bytes = 0;
  int64_t reloaded_bytes = 0;
  int64_t in_flight_device_bytes = 0;  // device bytes held by OFFLOADs not yet released
};

class ActivationCopier {
 public:
  // `backend` provides the allocators (thread-safe) and the copy engines (one per copy thread,
  // made here), and must outlive the copier.
  ActivationCopier(kernels::Backend* backend, ActivationCopierOptions options = {});
  const Clock* clock() const { return options_.clock; }
  // Finishes every queued job, then stops the copy thread.
  ~ActivationCopier();
  ActivationCopier(const ActivationCopier&) = delete;
  ActivationCopier& operator=(const ActivationCopier&) = delete;

  // See the file comment. Slots that are empty or already on the target side are skipped. On an
  // allocation error nothing is changed and nothing is queued.
  absl::StatusOr<std::shared_ptr<CopyTicket>> StartOffload(absl::Span<kernels::Tensor* const> slots,
                                                           absl::string_view what);
  // `after` (optional): the stash's OFFLOAD ticket; the copy waits for it.
  absl::StatusOr<std::shared_ptr<CopyTicket>> StartReload(
      absl::Span<kernels::Tensor* const> slots, absl::string_view what,
      std::shared_ptr<CopyTicket> after = nullptr);
  // Frees the device copies an OFFLOAD ticket holds; the ticket must be done. Returns the bytes.
  int64_t ReleaseSource(CopyTicket& ticket);
  // Waits until every queued job has finished (copied, and delivered by the capped link);
  // returns the first copy error since the last Drain (or OK).
  absl::Status Drain();

  CopierStats stats() const;

 private:
  struct Job {
    bool offload = false;
    std::vector<kernels::CopySegment> segments;
    std::unique_ptr<kernels::CopyFence> fence;   // the compute the copy must follow (may be null)
    std::vector<kernels::Tensor> release_after;  // RELOAD: host tensors, freed once copied
    std::shared_ptr<CopyTicket> ticket;
    std::shared_ptr<CopyTicket> after;  // copy starts once this one is done
  };
  // One copy thread and its FIFO. Lane 0: D2H (and H2D when not duplex); lane 1: H2D.
  struct Lane {
    std::deque<Job> queue;
    int64_t running = 0;     // jobs popped and not yet finished
    int64_t ready_ns = 0;    // the link is busy until then (the last issued job's ready time)
  };

  absl::StatusOr<std::shared_ptr<CopyTicket>> Start(absl::Span<kernels::Tensor* const> slots,
                                                    bool offload, absl::string_view what,
                                                    std::shared_ptr<CopyTicket> after);
  void Loop(int lane);
  absl::Status RunJob(int lane, Job& job);
  int LaneOf(bool offload) const { return offload || !options_.duplex ? 0 : 1; }

  kernels::Backend* const backend_;
  const ActivationCopierOptions options_;
  // One engine per lane (index as lanes_), made in the constructor; an engine that could not be
  // made fails every job of its lane with that error. Unused with options_.raw_copy.
  absl::StatusOr<std::unique_ptr<kernels::CopyEngine>> engines_[2];

  mutable absl::Mutex mu_;
  Lane lanes_[2] ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  CopierStats stats_ ABSL_GUARDED_BY(mu_);

  std::vector<std::thread> threads_;  // last: start after every member above is initialised
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_ACTIVATION_COPIER_H_
