#include "kernels/cuda/cuda_memory.h"

#include <cstdint>
#include <limits>

#include "glog/logging.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"

namespace pipetrain::kernels::cuda {
namespace {

class StreamOrderedDeviceMemory final : public RawMemory {
 public:
  StreamOrderedDeviceMemory(int device, cudaMemPool_t pool, cudaStream_t stream)
      : device_(device), pool_(pool), stream_(stream) {}

  void* Allocate(size_t bytes) override {
    ScopedDevice scope(device_);
    if (!scope.status().ok()) return nullptr;
    void* p = nullptr;
    const cudaError_t err = cudaMallocFromPoolAsync(&p, bytes == 0 ? 256 : bytes, pool_, stream_);
    if (err != cudaSuccess) {
      cudaGetLastError();  // an out-of-memory must not stick to the next unrelated call
      return nullptr;
    }
    return p;
  }
  void Free(void* p, size_t) override {
    ScopedDevice scope(device_);
    const cudaError_t err = cudaFreeAsync(p, stream_);
    LOG_IF(ERROR, err != cudaSuccess) << "cudaFreeAsync: " << cudaGetErrorString(err);
  }

 private:
  const int device_;
  const cudaMemPool_t pool_;
  const cudaStream_t stream_;
};

class PinnedHostMemory final : public RawMemory {
 public:
  explicit PinnedHostMemory(int device) : device_(device) {}
  void* Allocate(size_t bytes) override {
    ScopedDevice scope(device_);
    if (!scope.status().ok()) return nullptr;
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes == 0 ? 64 : bytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void Free(void* p, size_t) override {
    ScopedDevice scope(device_);
    const cudaError_t err = cudaFreeHost(p);
    LOG_IF(ERROR, err != cudaSuccess) << "cudaFreeHost: " << cudaGetErrorString(err);
  }

 private:
  const int device_;
};

}  // namespace

absl::StatusOr<cudaMemPool_t> CreateCachingDevicePool(int device) {
  PT_CUDA_DEVICE_SCOPE(device);
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  PT_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&pool, &props));
  // Keep freed memory: without this the pool gives it back to the driver at every
  // synchronisation and the next allocation pays for cudaMalloc again.
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  if (absl::Status status =
          ToStatus(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                   "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)", __FILE__, __LINE__);
      !status.ok()) {
    cudaMemPoolDestroy(pool);
    return status;
  }
  return pool;
}

std::unique_ptr<RawMemory> MakeStreamOrderedDeviceMemory(int device, cudaMemPool_t pool,
                                                         cudaStream_t stream) {
  return std::make_unique<StreamOrderedDeviceMemory>(device, pool, stream);
}

std::unique_ptr<RawMemory> MakePinnedHostMemory(int device) {
  return std::make_unique<PinnedHostMemory>(device);
}

}  // namespace pipetrain::kernels::cuda
