// OffloadTable: which (stage, microbatch) stashes of one worker are off the device, or on their
// way back, and the copy tickets that say when. It is the runners' side of OFFLOAD/RELOAD on top
// of an ActivationCopier (see activation_copier.h for the ownership protocol and accounting):
//   Offload(s, mb, slots)  OFFLOAD: queues the D2H copy and returns at once.
//   Reload(s, mb, slots)   RELOAD: allocates the device copy, queues the H2D copy, returns.
//   AwaitResident(s, mb)   before B/W/BW: waits for a pending RELOAD's copy (the only place
//                          compute ever waits for a copy, and only if it is late); an
//                          offloaded stash that was never reloaded is a FailedPrecondition.
//   ReleaseAtComputeEnd()  at the end of every compute action: waits for every offload copy
//                          issued so far and frees the device copies. Until then they count as
//                          device bytes (held_device_bytes); see activation_copier.h.
//   Release(s, mb)         RELEASE: the same for one offload made with explicit_release, which
//                          compute ends leave alone.
// Time spent waiting is accumulated (wait_ns) so tests and metrics can tell whether copies
// were hidden behind compute.
//
// Thread-safety: not thread-safe; driven by the executor thread like the runner that owns it.
#ifndef PIPETRAIN_WORKER_RUNTIME_OFFLOAD_TABLE_H_
#define PIPETRAIN_WORKER_RUNTIME_OFFLOAD_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "kernels/tensor.h"
#include "worker/runtime/activation_copier.h"

namespace pipetrain::worker {

class OffloadTable {
 public:
  // `copier` is not owned and must outlive the table.
  explicit OffloadTable(ActivationCopier* copier) : copier_(copier) {}

  // FailedPrecondition if (stage, microbatch) is already offloaded. Returns the bytes moved.
  absl::StatusOr<int64_t> Offload(int stage, int microbatch,
                                  const std::vector<kernels::Tensor*>& slots,
                                  bool explicit_release = false);
  // Waits for the offload copy of (stage, microbatch), made with explicit_release, and frees
  // its device copy; returns the bytes freed. FailedPrecondition if there is no such copy.
  absl::StatusOr<int64_t> Release(int stage, int microbatch);
  // FailedPrecondition if (stage, microbatch) is not offloaded (or already reloading).
  absl::Status Reload(int stage, int microbatch, const std::vector<kernels::Tensor*>& slots);
  // OK at once if (stage, microbatch) was never offloaded; waits for its RELOAD copy if one is
  // pending; FailedPrecondition naming `action` if it is offloaded and not reloaded.
  absl::Status AwaitResident(int stage, int microbatch, const char* action);
  // True while (stage, microbatch) is offloaded or its reload has not been awaited.
  bool Contains(int stage, int microbatch) const {
    return entries_.contains(Key(stage, microbatch));
  }
  // Waits for every pending offload copy and frees the device copies; returns the bytes freed.
  int64_t ReleaseAtComputeEnd();
  // Device bytes of offloaded stashes not released yet.
  int64_t held_device_bytes() const { return held_bytes_; }
  // Waits for every copy, releases every device copy and forgets every entry;
  // FailedPrecondition if some stash was never brought back (the copy status otherwise).
  absl::Status EndStep();

  int64_t wait_ns() const { return wait_ns_; }
  int64_t waits() const { return waits_; }
  // Time compute ends spent waiting for offload copies (stalls of a too-slow link).
  int64_t release_wait_ns() const { return release_wait_ns_; }

 private:
  enum class State { kOffloaded, kReloading };
  struct Entry {
    State state;
    std::shared_ptr<CopyTicket> ticket;  // the latest copy of this stash
  };
  void ReleaseAll();
  static int64_t Key(int stage, int microbatch) {
    return (static_cast<int64_t>(stage) << 32) | static_cast<uint32_t>(microbatch);
  }

  ActivationCopier* copier_;
  absl::flat_hash_map<int64_t, Entry> entries_;
  std::vector<std::shared_ptr<CopyTicket>> unreleased_;  // offloads holding device copies
  // Offloads holding device copies until their RELEASE, by stash.
  absl::flat_hash_map<int64_t, std::shared_ptr<CopyTicket>> awaiting_release_;
  int64_t held_bytes_ = 0;
  int64_t wait_ns_ = 0;
  int64_t waits_ = 0;  // awaits that found the copy unfinished
  int64_t release_wait_ns_ = 0;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_OFFLOAD_TABLE_H_
