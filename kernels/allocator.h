// CountingAllocator: hands out Tensors (and a backend's ScratchBuffers) from an underlying
// RawMemory (malloc, a stream-ordered CUDA pool, a pinned host pool, ...) while counting the bytes
// currently allocated and the peak, and optionally enforcing a byte budget. The worker runtime
// uses a backend's device allocator as the "device memory" of a worker (for the CPU backend that
// is ordinary RAM accounted as device memory), so activation bytes it reports are the bytes
// really held. Scratch (workspaces, partial sums, staging) counts like tensors, so bytes in use
// and the peak cover everything a backend holds on the device; scratch_bytes() says how much of
// it is scratch. Memory a RawMemory keeps cached after a free (a pool) is not in use and is not
// counted.
// Thread-safety: all methods are thread-safe (one internal mutex); tensors may be released from
// any thread. The allocator must outlive every Tensor it returned.
#ifndef PIPETRAIN_KERNELS_ALLOCATOR_H_
#define PIPETRAIN_KERNELS_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "kernels/scratch_buffer.h"
#include "kernels/tensor.h"

namespace pipetrain::kernels {

// Raw memory source behind a CountingAllocator. Implementations must be thread-safe.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  // Returns nullptr when the memory cannot be obtained.
  virtual void* Allocate(size_t bytes) = 0;
  // `bytes` is what Allocate was asked for when it returned `ptr`.
  virtual void Free(void* ptr, size_t bytes) = 0;
};

// A consistent snapshot of a CountingAllocator's counters.
struct MemoryStats {
  int64_t bytes_in_use = 0;   // tensors + scratch
  int64_t peak_bytes = 0;     // highest bytes_in_use since construction or ResetPeak
  int64_t scratch_bytes = 0;  // the part of bytes_in_use held as scratch
  int64_t budget_bytes = 0;
  int64_t live_allocations = 0;  // tensors + scratch buffers
};

// 64-byte aligned malloc/free.
std::unique_ptr<RawMemory> MakeAlignedHostMemory();

class CountingAllocator {
 public:
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

  CountingAllocator(std::string name, Location location, std::unique_ptr<RawMemory> raw,
                    int64_t budget_bytes = kUnlimited);
  CountingAllocator(const CountingAllocator&) = delete;
  CountingAllocator& operator=(const CountingAllocator&) = delete;
  ~CountingAllocator();

  // Allocates an uninitialised tensor of `shape`. Errors: InvalidArgument for a negative
  // dimension; ResourceExhausted (naming `what`, the request and the budget) when the allocation
  // would exceed the budget or the raw memory is exhausted.
  absl::StatusOr<Tensor> Allocate(const Shape& shape, absl::string_view what,
                                  DType dtype = DType::kF32);
  // Allocates `bytes` (>= 0) of uninitialised scratch for `op`, counted like a tensor. Errors:
  // ResourceExhausted naming `op` and the bytes when the budget or the raw memory cannot hold it.
  absl::StatusOr<ScratchBuffer> AllocateScratch(int64_t bytes, absl::string_view op);

  const std::string& name() const { return name_; }
  Location location() const { return location_; }
  int64_t current_bytes() const;
  int64_t peak_bytes() const;
  int64_t budget_bytes() const;
  int64_t live_allocations() const;
  int64_t scratch_bytes() const;
  MemoryStats stats() const;
  // A budget below current_bytes only affects later allocations.
  void set_budget_bytes(int64_t budget_bytes);
  // Sets the peak to the current value (start of a new measurement window).
  void ResetPeak();

 private:
  friend class Tensor;
  friend class ScratchBuffer;
  // Counts `bytes` (as scratch or not) unless the budget refuses them (ResourceExhausted naming
  // `what`).
  absl::Status Reserve(int64_t bytes, bool scratch, absl::string_view what);
  void Release(float* data, int64_t bytes);
  void ReleaseScratch(void* data, int64_t bytes);
  void Unreserve(int64_t bytes, bool scratch);

  const std::string name_;
  const Location location_;
  const std::unique_ptr<RawMemory> raw_;
  mutable absl::Mutex mu_;
  int64_t current_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t budget_bytes_ ABSL_GUARDED_BY(mu_);
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t scratch_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_ALLOCATOR_H_
