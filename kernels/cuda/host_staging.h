// HostStaging: how a CudaBackend gets small host-side inputs of its kernels (token ids, targets,
// the embedding gradient plan) onto the device without waiting for its compute stream. A
// cudaMemcpyAsync from pageable memory first waits for the stream (so every embedding or loss op
// waited for all compute queued before it); from page-locked memory it is truly queued. So the
// bytes are first copied on the host into one of a few pinned buffers, and that buffer is not
// written again until an event recorded after its device copy has completed (normally long
// since: it is reused only every kSlots-th call). Buffers grow to the largest request and are
// host memory outside the device allocator's count.
// Thread-safety: not thread-safe; used by the thread driving the backend.
#ifndef PIPETRAIN_KERNELS_CUDA_HOST_STAGING_H_
#define PIPETRAIN_KERNELS_CUDA_HOST_STAGING_H_

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pipetrain::kernels::cuda {

class HostStaging {
 public:
  static constexpr int kSlots = 4;

  // `stream` must outlive the staging; its device must be current whenever the staging is
  // created, used or destroyed.
  static absl::StatusOr<std::unique_ptr<HostStaging>> Create(cudaStream_t stream);
  // Waits for the copies still queued, then frees the buffers.
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Queues a copy of `bytes` from `src` (any host memory; read before returning) to device memory
  // `dst` on the stream, ordered after the work already queued there.
  absl::Status CopyToDevice(const void* src, size_t bytes, void* dst);

 private:
  struct Slot {
    void* host = nullptr;
    size_t capacity = 0;
    cudaEvent_t done = nullptr;  // recorded after the slot's last device copy
    bool pending = false;
  };
  explicit HostStaging(cudaStream_t stream) : stream_(stream) {}

  const cudaStream_t stream_;
  std::array<Slot, kSlots> slots_;
  int next_ = 0;
};

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_HOST_STAGING_H_
