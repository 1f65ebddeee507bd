#include "kernels/cuda/cuda_copy_engine.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"

namespace pipetrain::kernels::cuda {
namespace {

class CudaFence final : public CopyFence {
 public:
  CudaFence(int device, cudaEvent_t event) : device_(device), event_(event) {}
  ~CudaFence() override {
    ScopedDevice scope(device_);
    cudaEventDestroy(event_);  // released by the driver once recorded work completes
  }
  cudaEvent_t event() const { return event_; }

 private:
  const int device_;
  const cudaEvent_t event_;
};

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(int device, cudaStream_t compute, cudaStream_t copy)
      : device_(device), compute_(compute), copy_(copy) {}
  ~CudaCopyEngine() override {
    ScopedDevice scope(device_);
    cudaStreamSynchronize(copy_);
    cudaStreamDestroy(copy_);
  }

  absl::StatusOr<std::unique_ptr<CopyFence>> FenceCompute() override {
    PT_CUDA_DEVICE_SCOPE(device_);
    cudaEvent_t event = nullptr;
    PT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    auto fence = std::make_unique<CudaFence>(device_, event);
    PT_CUDA_RETURN_IF_ERROR(cudaEventRecord(event, compute_));
    return fence;
  }

  absl::Status Copy(const CopyFence* fence, CopyDirection direction,
                    absl::Span<const CopySegment> segments) override {
    PT_CUDA_DEVICE_SCOPE(device_);
    if (fence != nullptr) {
      const auto* cuda_fence = dynamic_cast<const CudaFence*>(fence);
      if (cuda_fence == nullptr) {
        return absl::InvalidArgumentError("CUDA copy engine given another backend's fence");
      }
      PT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_, cuda_fence->event(), 0));
    }
    const cudaMemcpyKind kind =
        direction == CopyDirection::kDeviceToHost ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    for (const CopySegment& s : segments) {
      if (s.bytes == 0) continue;
      PT_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(s.dst, s.src, static_cast<size_t>(s.bytes), kind, copy_));
    }
    PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_));
    return absl::OkStatus();
  }

 private:
  const int device_;
  const cudaStream_t compute_;
  const cudaStream_t copy_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CopyEngine>> MakeCudaCopyEngine(int device,
                                                               cudaStream_t compute_stream) {
  PT_CUDA_DEVICE_SCOPE(device);
  cudaStream_t copy = nullptr;
  PT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  return std::make_unique<CudaCopyEngine>(device, compute_stream, copy);
}

}  // namespace pipetrain::kernels::cuda
