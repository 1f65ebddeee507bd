// The raw memory behind a CudaBackend's counting allocators (kernels/allocator.h):
// - Device: stream-ordered allocation (cudaMallocFromPoolAsync / cudaFreeAsync) on the backend's
//   compute stream, from a pool of its own whose release threshold keeps freed memory cached. A
//   cudaFree synchronises the whole device (a tensor reset waited 800 ms behind an unrelated
//   busy stream), so compute, copies and NCCL could never overlap; a stream-ordered free is
//   queued behind the work already on the compute stream and returns at once, and memory it
//   frees is reused by later allocations on that stream in order. Memory used on another stream
//   (a copy stream) must be ordered against the compute stream by events (copy_engine.h) and be
//   freed only after that use (the offload protocol, worker/runtime/activation_copier.h).
// - Host: page-locked memory (cudaHostAlloc, portable across devices) for offload targets and
//   staging; the backend wraps it in a CachingRawMemory (kernels/caching_memory.h) because
//   cudaFreeHost synchronises the device.
// Every call makes the backend's device current first (cuda_device.h): frees come from any thread.
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_MEMORY_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_MEMORY_H_

#include <cuda_runtime.h>

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/allocator.h"

namespace pipetrain::kernels::cuda {

// A device-local pool on `device` that keeps every freed byte cached (release threshold: all).
// The caller destroys it with cudaMemPoolDestroy after every allocation from it is freed.
absl::StatusOr<cudaMemPool_t> CreateCachingDevicePool(int device);

// Allocations from `pool`, ordered on `stream` (both must outlive the returned memory).
std::unique_ptr<RawMemory> MakeStreamOrderedDeviceMemory(int device, cudaMemPool_t pool,
                                                         cudaStream_t stream);
// Page-locked host memory, uncached: one cudaHostAlloc / cudaFreeHost per call.
std::unique_ptr<RawMemory> MakePinnedHostMemory(int device);

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_MEMORY_H_
