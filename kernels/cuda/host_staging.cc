#include "kernels/cuda/host_staging.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace pipetrain::kernels::cuda {

absl::StatusOr<std::unique_ptr<HostStaging>> HostStaging::Create(cudaStream_t stream) {
  std::unique_ptr<HostStaging> staging(new HostStaging(stream));
  for (Slot& slot : staging->slots_) {
    PT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  }
  return staging;
}

HostStaging::~HostStaging() {
  for (Slot& slot : slots_) {
    if (slot.pending) cudaEventSynchronize(slot.done);
    if (slot.host != nullptr) cudaFreeHost(slot.host);
    if (slot.done != nullptr) cudaEventDestroy(slot.done);
  }
}

absl::Status HostStaging::CopyToDevice(const void* src, size_t bytes, void* dst) {
  if (bytes == 0) return absl::OkStatus();
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % kSlots;
  // The buffer's previous copy must have read it (kSlots calls ago: normally long done).
  if (slot.pending) {
    PT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.done));
    slot.pending = false;
  }
  if (slot.capacity < bytes) {
    // Geometric growth: a few reallocations (cudaFreeHost synchronises the device) per run.
    const size_t capacity = std::max(bytes, 2 * slot.capacity);
    if (slot.host != nullptr) PT_CUDA_RETURN_IF_ERROR(cudaFreeHost(slot.host));
    slot.host = nullptr;
    slot.capacity = 0;
    PT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&slot.host, capacity, cudaHostAllocDefault));
    slot.capacity = capacity;
  }
  std::memcpy(slot.host, src, bytes);
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, slot.host, bytes, cudaMemcpyHostToDevice, stream_));
  PT_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.done, stream_));
  slot.pending = true;
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels::cuda
