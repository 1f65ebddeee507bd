// CopyEngine: how an offload copy thread moves stash bytes between a backend's device memory and
// its host memory, beside the compute that thread does not drive. The worker's ActivationCopier
// (worker/runtime/activation_copier.h) asks its backend for one engine per copy thread
// (Backend::NewCopyEngine) and uses it in two steps:
//   1. FenceCompute(), on the thread driving the backend (the executor), when OFFLOAD/RELOAD is
//      issued and after the destination has been allocated: a mark after every piece of work
//      issued so far. CUDA: an event recorded on the backend's compute stream (the stash's
//      producer kernels, and the stream-ordered allocation of a RELOAD destination, come before
//      it). CPU: compute is synchronous, so there is nothing to mark (null).
//   2. Copy(fence, ...), on the copy thread: waits for the fence without stalling compute, copies
//      every segment and returns once the bytes are at their destinations. CUDA: cudaSetDevice,
//      the engine's own copy stream waits for the event, cudaMemcpyAsync per segment (host
//      memory is pinned), then that stream is synchronised. CPU: memcpy.
// Device memory read by a D2H copy or written by an H2D copy must stay allocated until Copy has
// returned; the copier guarantees it (activation_copier.h).
// Thread-safety: FenceCompute on the backend's driving thread; Copy on one copy thread at a time
// per engine. Engines of one backend are independent and may copy concurrently.
#ifndef PIPETRAIN_KERNELS_COPY_ENGINE_H_
#define PIPETRAIN_KERNELS_COPY_ENGINE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pipetrain::kernels {

enum class CopyDirection { kDeviceToHost, kHostToDevice };

struct CopySegment {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t bytes = 0;
};

// A point in a backend's compute; opaque (what a backend needs to wait for it).
class CopyFence {
 public:
  virtual ~CopyFence() = default;
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // May return null: nothing to wait for.
  virtual absl::StatusOr<std::unique_ptr<CopyFence>> FenceCompute() = 0;
  // `fence` may be null.
  virtual absl::Status Copy(const CopyFence* fence, CopyDirection direction,
                            absl::Span<const CopySegment> segments) = 0;
};

// For backends whose device memory is host memory and whose compute is synchronous (CPU): no
// fence, memcpy.
std::unique_ptr<CopyEngine> MakeMemcpyCopyEngine();

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_COPY_ENGINE_H_
