// CachingRawMemory: a RawMemory that keeps freed blocks and hands them out again for requests of
// the same size class instead of returning them to the memory underneath. It exists for pinned
// host memory: cudaFreeHost synchronises the whole device (a free of an offloaded activation
// waited for an unrelated 800 ms kernel), and cudaMallocHost is slow, while an offloading worker
// frees and reallocates the same few activation sizes every step. Size classes are the request
// rounded up to kGranularity bytes, so a block is reused only for requests of (nearly) its size.
// Cached bytes are bounded by max_cached_bytes; a free that would exceed it goes straight to the
// memory underneath. When the memory underneath refuses an allocation the cache is emptied and
// the allocation retried once.
// Counting stays with the CountingAllocator above it: cached blocks are not in use.
// Thread-safety: thread-safe (one internal mutex; the memory underneath is called outside it
// except by Trim and the destructor).
#ifndef PIPETRAIN_KERNELS_CACHING_MEMORY_H_
#define PIPETRAIN_KERNELS_CACHING_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "kernels/allocator.h"

namespace pipetrain::kernels {

struct CachingMemoryStats {
  int64_t cached_bytes = 0;  // held for reuse, not in use
  int64_t cached_blocks = 0;
  int64_t hits = 0;    // allocations served from the cache
  int64_t misses = 0;  // allocations that went to the memory underneath
  int64_t underlying_frees = 0;
};

class CachingRawMemory final : public RawMemory {
 public:
  static constexpr size_t kGranularity = 256;

  CachingRawMemory(std::unique_ptr<RawMemory> underlying, int64_t max_cached_bytes);
  // Returns every cached block to the memory underneath.
  ~CachingRawMemory() override;

  void* Allocate(size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;
  // Returns every cached block to the memory underneath.
  void Trim();
  CachingMemoryStats stats() const;

  // The size class (bytes actually obtained from the memory underneath) of a request.
  static size_t SizeClass(size_t bytes);

 private:
  const std::unique_ptr<RawMemory> underlying_;
  const int64_t max_cached_bytes_;
  mutable absl::Mutex mu_;
  std::map<size_t, std::vector<void*>> cached_ ABSL_GUARDED_BY(mu_);  // size class -> blocks
  CachingMemoryStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CACHING_MEMORY_H_
