#include "tests/cuda/busy_kernel.h"

namespace pipetrain::testing {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void BusyK(int64_t nanoseconds) {
  const uint64_t end = GlobalTimerNs() + static_cast<uint64_t>(nanoseconds);
  while (GlobalTimerNs() < end) __nanosleep(1000);
}

}  // namespace

cudaError_t LaunchBusyKernel(cudaStream_t stream, int64_t nanoseconds) {
  BusyK<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

}  // namespace pipetrain::testing
