// ScratchBuffer: untyped working memory a backend holds for its own use (library workspaces,
// partial sums of a reduction, staged token ids, bf16 copies of GEMM inputs). It comes from a
// CountingAllocator like a Tensor, so it is counted in that allocator's bytes in use, its peak and
// its budget (and separately in scratch_bytes()); a budget that cannot hold it refuses it with a
// ResourceExhausted naming the op. Owned and move-only; returned to its allocator when destroyed
// or reset, and the allocator must outlive it.
// Thread-safety: a plain value; concurrent reads are safe, writes need external sync.
#ifndef PIPETRAIN_KERNELS_SCRATCH_BUFFER_H_
#define PIPETRAIN_KERNELS_SCRATCH_BUFFER_H_

#include <cstdint>

namespace pipetrain::kernels {

class CountingAllocator;

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer() { Reset(); }
  ScratchBuffer(ScratchBuffer&& other) noexcept;
  ScratchBuffer& operator=(ScratchBuffer&& other) noexcept;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  bool empty() const { return owner_ == nullptr; }
  // Raw pointer into the buffer (a device pointer for a CUDA device allocator).
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  // Returns the memory to its allocator; the buffer becomes empty.
  void Reset();

 private:
  friend class CountingAllocator;
  ScratchBuffer(void* data, int64_t bytes, CountingAllocator* owner)
      : data_(data), bytes_(bytes), owner_(owner) {}

  void* data_ = nullptr;
  int64_t bytes_ = 0;
  CountingAllocator* owner_ = nullptr;
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_SCRATCH_BUFFER_H_
