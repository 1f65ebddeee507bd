// A kernel that keeps one block busy for a given wall time, for GPU tests that need a stream to
// be busy (a free or a synchronisation that must not wait for it). Test-only.
// Thread-safety: stateless.
#ifndef PIPETRAIN_TESTS_CUDA_BUSY_KERNEL_H_
#define PIPETRAIN_TESTS_CUDA_BUSY_KERNEL_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace pipetrain::testing {

// Queues on `stream` one single-thread kernel that spins for `nanoseconds` of GPU wall time.
cudaError_t LaunchBusyKernel(cudaStream_t stream, int64_t nanoseconds);

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_CUDA_BUSY_KERNEL_H_
