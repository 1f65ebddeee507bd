// CountingAllocator: hands out Tensors from an underlying RawMemory (malloc, cudaMalloc, pinned
// host memory, ...) while counting the bytes currently allocated and the peak, and optionally
// enforcing a byte budget. The worker runtime uses a backend's device allocator as the "device
// memory" of a worker (for the CPU backend that is ordinary RAM accounted as device memory), so
// activation bytes it reports are the bytes really held.
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
#include "kernels/tensor.h"

namespace pipetrain::kernels {

// Raw memory source behind a CountingAllocator. Implementations must be thread-safe.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  // Returns nullptr when the memory cannot be obtained.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
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
  absl::StatusOr<Tensor> Allocate(const Shape& shape, absl::string_view what);

  const std::string& name() const { return name_; }
  Location location() const { return location_; }
  int64_t current_bytes() const;
  int64_t peak_bytes() const;
  int64_t budget_bytes() const;
  int64_t live_allocations() const;
  // A budget below current_bytes only affects later allocations.
  void set_budget_bytes(int64_t budget_bytes);
  // Sets the peak to the current value (start of a new measurement window).
  void ResetPeak();

 private:
  friend class Tensor;
  void Release(float* data, int64_t bytes);

  const std::string name_;
  const Location location_;
  const std::unique_ptr<RawMemory> raw_;
  mutable absl::Mutex mu_;
  int64_t current_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t budget_bytes_ ABSL_GUARDED_BY(mu_);
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_ALLOCATOR_H_
