// Memory bookkeeping that every backend relies on, on the CPU: scratch counted by the
// CountingAllocator (bytes in use, peak, budget refusal naming the op), the caching pool that
// CUDA's pinned host memory goes through, and the memcpy copy engine of the CPU backend.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/caching_memory.h"
#include "kernels/copy_engine.h"
#include "kernels/cpu/cpu_backend.h"

namespace pipetrain::kernels {
namespace {

// Heap memory that records every call and can be told to refuse allocations past a limit.
class FakeMemory : public RawMemory {
 public:
  struct Log {
    int allocations = 0;
    int frees = 0;
    int64_t live_bytes = 0;
    std::map<void*, size_t> live;
    int64_t limit = INT64_MAX;  // refuse allocations that would exceed this many live bytes
  };
  explicit FakeMemory(Log* log) : log_(log) {}
  void* Allocate(size_t bytes) override {
    if (log_->live_bytes + static_cast<int64_t>(bytes) > log_->limit) return nullptr;
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    ++log_->allocations;
    log_->live_bytes += static_cast<int64_t>(bytes);
    log_->live[p] = bytes;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    EXPECT_EQ(log_->live.at(p), bytes) << "freed with another size than allocated";
    log_->live.erase(p);
    log_->live_bytes -= static_cast<int64_t>(bytes);
    ++log_->frees;
    std::free(p);
  }

 private:
  Log* log_;
};

TEST(KernelScratchTest, ScratchIsCountedInBytesInUsePeakAndScratchBytes) {
  FakeMemory::Log log;
  CountingAllocator alloc("dev", Location::kDevice, std::make_unique<FakeMemory>(&log));
  auto t = alloc.Allocate({25}, "activation");
  ASSERT_TRUE(t.ok());
  {
    auto s = alloc.AllocateScratch(1000, "AttentionBackward");
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->bytes(), 1000);
    EXPECT_NE(s->data(), nullptr);
    const MemoryStats stats = alloc.stats();
    EXPECT_EQ(stats.bytes_in_use, 1100);
    EXPECT_EQ(stats.scratch_bytes, 1000);
    EXPECT_EQ(stats.peak_bytes, 1100);
    EXPECT_EQ(stats.live_allocations, 2);
    ScratchBuffer moved = std::move(*s);
    EXPECT_TRUE(s->empty());
    EXPECT_EQ(alloc.scratch_bytes(), 1000);  // a move is not a free
  }
  EXPECT_EQ(alloc.current_bytes(), 100);
  EXPECT_EQ(alloc.scratch_bytes(), 0);
  EXPECT_EQ(alloc.peak_bytes(), 1100);
  EXPECT_EQ(alloc.live_allocations(), 1);
  EXPECT_EQ(log.live_bytes, 100) << "the scratch memory went back to the memory underneath";
}

TEST(KernelScratchTest, BudgetRefusesScratchNamingTheOpAndTheBytes) {
  FakeMemory::Log log;
  CountingAllocator alloc("cuda-device", Location::kDevice, std::make_unique<FakeMemory>(&log),
                          /*budget_bytes=*/4096);
  auto t = alloc.Allocate({512}, "stash");  // 2048 bytes
  ASSERT_TRUE(t.ok());
  auto s = alloc.AllocateScratch(3000, "AttentionBackward (score gradients, heads x T^2)");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find("AttentionBackward"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("3000 bytes"), std::string::npos) << s.status();
  EXPECT_EQ(alloc.current_bytes(), 2048);
  EXPECT_EQ(alloc.live_allocations(), 1);
  EXPECT_EQ(log.allocations, 1) << "a refused scratch must not reach the memory underneath";
  // Scratch and tensors share one budget: held scratch refuses a tensor.
  auto fits = alloc.AllocateScratch(2048, "Gemm (bf16 copy of a)");
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(alloc.Allocate({1}, "one more").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(alloc.AllocateScratch(-1, "x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KernelScratchTest, ScratchTheMemoryUnderneathRefusesIsResourceExhaustedAndUncounted) {
  FakeMemory::Log log;
  log.limit = 100;
  CountingAllocator alloc("dev", Location::kDevice, std::make_unique<FakeMemory>(&log));
  auto s = alloc.AllocateScratch(200, "EmbeddingBackward (segment partial sums)");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find("EmbeddingBackward"), std::string::npos);
  EXPECT_EQ(alloc.current_bytes(), 0);
  EXPECT_EQ(alloc.scratch_bytes(), 0);
  EXPECT_EQ(alloc.live_allocations(), 0);
}

TEST(KernelCachingMemoryTest, AFreedBlockIsReusedForTheSameSizeClassOnly) {
  FakeMemory::Log log;
  CachingRawMemory pool(std::make_unique<FakeMemory>(&log), /*max_cached_bytes=*/1 << 20);
  EXPECT_EQ(CachingRawMemory::SizeClass(1000), 1024u);
  EXPECT_EQ(CachingRawMemory::SizeClass(1024), 1024u);
  EXPECT_EQ(CachingRawMemory::SizeClass(1025), 1280u);
  EXPECT_EQ(CachingRawMemory::SizeClass(0), CachingRawMemory::kGranularity);
  void* a = pool.Allocate(1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(log.live.at(a), 1024u) << "the block underneath is the whole size class";
  pool.Free(a, 1000);
  EXPECT_EQ(log.frees, 0) << "a freed block is cached, not freed";
  EXPECT_EQ(pool.stats().cached_bytes, 1024);
  void* b = pool.Allocate(1020);  // same class
  EXPECT_EQ(b, a);
  EXPECT_EQ(log.allocations, 1);
  void* c = pool.Allocate(1100);  // another class: a new block
  EXPECT_NE(c, a);
  EXPECT_EQ(log.allocations, 2);
  const CachingMemoryStats stats = pool.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.cached_bytes, 0);
  pool.Free(b, 1020);
  pool.Free(c, 1100);
  EXPECT_EQ(pool.stats().cached_blocks, 2);
  pool.Trim();
  EXPECT_EQ(log.frees, 2);
  EXPECT_EQ(log.live_bytes, 0);
  EXPECT_EQ(pool.stats().cached_bytes, 0);
}

TEST(KernelCachingMemoryTest, CachedBytesStayUnderTheCap) {
  FakeMemory::Log log;
  CachingRawMemory pool(std::make_unique<FakeMemory>(&log), /*max_cached_bytes=*/2048);
  void* a = pool.Allocate(1024);
  void* b = pool.Allocate(1024);
  void* c = pool.Allocate(1024);
  pool.Free(a, 1024);
  pool.Free(b, 1024);
  EXPECT_EQ(log.frees, 0);
  pool.Free(c, 1024);  // would make 3072 cached
  EXPECT_EQ(log.frees, 1);
  EXPECT_EQ(pool.stats().cached_bytes, 2048);
  EXPECT_EQ(pool.stats().underlying_frees, 1);
}

TEST(KernelCachingMemoryTest, ARefusedAllocationEmptiesTheCacheAndRetries) {
  FakeMemory::Log log;
  log.limit = 4096;
  CachingRawMemory pool(std::make_unique<FakeMemory>(&log), /*max_cached_bytes=*/1 << 20);
  void* a = pool.Allocate(1024);
  void* b = pool.Allocate(2048);
  pool.Free(a, 1024);
  pool.Free(b, 2048);
  // 3072 bytes are cached underneath; 2304 more do not fit until the cache is given back.
  void* c = pool.Allocate(2304);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(log.frees, 2);
  EXPECT_EQ(pool.stats().cached_bytes, 0);
  pool.Free(c, 2304);
}

TEST(KernelCachingMemoryTest, TheDestructorGivesEveryCachedBlockBack) {
  FakeMemory::Log log;
  {
    CachingRawMemory pool(std::make_unique<FakeMemory>(&log), 1 << 20);
    void* a = pool.Allocate(300);
    void* b = pool.Allocate(5000);
    pool.Free(a, 300);
    pool.Free(b, 5000);
  }
  EXPECT_EQ(log.live_bytes, 0);
  EXPECT_EQ(log.frees, 2);
}

TEST(KernelCachingMemoryTest, TheCountingAllocatorAboveStillCountsEveryByteAndTheBudget) {
  FakeMemory::Log log;
  CountingAllocator alloc(
      "pinned", Location::kHost,
      std::make_unique<CachingRawMemory>(std::make_unique<FakeMemory>(&log), 1 << 20),
      /*budget_bytes=*/1000);
  {
    auto t = alloc.Allocate({200}, "offloaded stash");  // 800 bytes
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(alloc.current_bytes(), 800);
  }
  EXPECT_EQ(alloc.current_bytes(), 0) << "a cached block is not in use";
  EXPECT_EQ(log.live_bytes, 1024) << "but it is still held underneath";
  auto again = alloc.Allocate({200}, "offloaded stash");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(log.allocations, 1) << "served from the cache";
  EXPECT_EQ(alloc.Allocate({100}, "over budget").status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(KernelCopyEngineTest, TheCpuBackendsEngineHasNoFenceAndCopiesEverySegment) {
  CpuBackend backend;
  auto engine = backend.NewCopyEngine();
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto fence = (*engine)->FenceCompute();
  ASSERT_TRUE(fence.ok());
  EXPECT_EQ(*fence, nullptr) << "CPU compute is synchronous: nothing to wait for";
  std::vector<float> a = {1, 2, 3}, b = {4, 5}, da(3), db(2);
  const CopySegment segments[] = {
      {a.data(), da.data(), 12}, {b.data(), db.data(), 8}, {nullptr, nullptr, 0}};
  ASSERT_TRUE((*engine)->Copy(nullptr, CopyDirection::kDeviceToHost, segments).ok());
  EXPECT_EQ(da, a);
  EXPECT_EQ(db, b);
}

}  // namespace
}  // namespace pipetrain::kernels
