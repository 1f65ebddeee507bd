#include "kernels/caching_memory.h"

#include <utility>

namespace pipetrain::kernels {

CachingRawMemory::CachingRawMemory(std::unique_ptr<RawMemory> underlying, int64_t max_cached_bytes)
    : underlying_(std::move(underlying)), max_cached_bytes_(max_cached_bytes) {}

CachingRawMemory::~CachingRawMemory() { Trim(); }

size_t CachingRawMemory::SizeClass(size_t bytes) {
  if (bytes == 0) return kGranularity;
  return (bytes + kGranularity - 1) / kGranularity * kGranularity;
}

void* CachingRawMemory::Allocate(size_t bytes) {
  const size_t size = SizeClass(bytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = cached_.find(size);
    if (it != cached_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) cached_.erase(it);
      stats_.cached_bytes -= static_cast<int64_t>(size);
      --stats_.cached_blocks;
      ++stats_.hits;
      return ptr;
    }
    ++stats_.misses;
  }
  void* ptr = underlying_->Allocate(size);
  if (ptr == nullptr) {
    // Blocks of other sizes may be what stands in the way.
    Trim();
    ptr = underlying_->Allocate(size);
  }
  return ptr;
}

void CachingRawMemory::Free(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t size = SizeClass(bytes);
  {
    absl::MutexLock lock(&mu_);
    if (stats_.cached_bytes + static_cast<int64_t>(size) <= max_cached_bytes_) {
      cached_[size].push_back(ptr);
      stats_.cached_bytes += static_cast<int64_t>(size);
      ++stats_.cached_blocks;
      return;
    }
    ++stats_.underlying_frees;
  }
  underlying_->Free(ptr, size);
}

void CachingRawMemory::Trim() {
  absl::MutexLock lock(&mu_);
  for (auto& [size, blocks] : cached_) {
    for (void* ptr : blocks) {
      underlying_->Free(ptr, size);
      ++stats_.underlying_frees;
    }
  }
  cached_.clear();
  stats_.cached_bytes = 0;
  stats_.cached_blocks = 0;
}

CachingMemoryStats CachingRawMemory::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace pipetrain::kernels
