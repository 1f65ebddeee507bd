// CudaBackend: allocation, transfers, cuBLAS GEMMs (row-major via the column-major transpose
// identity C^T = B^T A^T) and the glue to our kernels.
#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels::cuda {
namespace {

class CudaDeviceMemory : public RawMemory {
 public:
  void* Allocate(size_t bytes) override {
    void* p = nullptr;
    return cudaMalloc(&p, bytes == 0 ? 256 : bytes) == cudaSuccess ? p : nullptr;
  }
  void Free(void* p) override { cudaFree(p); }
};

class PinnedHostMemory : public RawMemory {
 public:
  void* Allocate(size_t bytes) override {
    void* p = nullptr;
    return cudaMallocHost(&p, bytes == 0 ? 64 : bytes) == cudaSuccess ? p : nullptr;
  }
  void Free(void* p) override { cudaFreeHost(p); }
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : options_(options),
      device_(std::make_unique<CountingAllocator>("cuda-device", Location::kDevice,
                                                  std::make_unique<CudaDeviceMemory>(),
                                                  options.device_budget_bytes)),
      host_(std::make_unique<CountingAllocator>("cuda-pinned-host", Location::kHost,
                                                std::make_unique<PinnedHostMemory>(),
                                                options.host_budget_bytes)),
      impl_(std::make_unique<Impl>()) {}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  const int count = CudaDeviceCount();
  if (options.device < 0 || options.device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", options.device, " not available (", count, " visible devices)"));
  }
  PT_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  std::unique_ptr<CudaBackend> be(new CudaBackend(options));
  PT_CUDA_RETURN_IF_ERROR(cublasCreate(&be->impl_->handle));
  // Deterministic: no atomics-based split-K reductions inside cuBLAS.
  PT_CUDA_RETURN_IF_ERROR(cublasSetAtomicsMode(be->impl_->handle, CUBLAS_ATOMICS_NOT_ALLOWED));
  return be;
}

CudaBackend::~CudaBackend() {
  if (impl_->handle != nullptr) cublasDestroy(impl_->handle);
  for (void* p : impl_->scratch) {
    if (p != nullptr) cudaFree(p);
  }
}

absl::Status CudaBackend::Synchronize() {
  PT_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaBackend::Scratch(int slot, size_t bytes) {
  if (impl_->scratch_bytes[slot] < bytes) {
    if (impl_->scratch[slot] != nullptr) {
      PT_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      PT_CUDA_RETURN_IF_ERROR(cudaFree(impl_->scratch[slot]));
      impl_->scratch[slot] = nullptr;
      impl_->scratch_bytes[slot] = 0;
    }
    PT_CUDA_RETURN_IF_ERROR(cudaMalloc(&impl_->scratch[slot], bytes));
    impl_->scratch_bytes[slot] = bytes;
  }
  return impl_->scratch[slot];
}

absl::StatusOr<const int32_t*> CudaBackend::StageIds(absl::Span<const int32_t> ids) {
  PT_ASSIGN_OR_RETURN(void* p, Scratch(0, std::max<size_t>(ids.size(), 1) * sizeof(int32_t)));
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(p, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  return static_cast<const int32_t*>(p);
}

absl::Status CudaBackend::DoUpload(absl::Span<const float> src, Tensor* dst) {
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(dst->data(), src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoDownload(const Tensor& src, absl::Span<float> dst) {
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(dst.data(), src.data(), dst.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CudaBackend::DoCopyToHost(const Tensor& src, absl::string_view what) {
  PT_ASSIGN_OR_RETURN(Tensor dst, host_->Allocate(src.shape(), what));
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToHost));
  return dst;
}

absl::StatusOr<Tensor> CudaBackend::DoCopyToDevice(const Tensor& src, absl::string_view what) {
  PT_ASSIGN_OR_RETURN(Tensor dst, device_->Allocate(src.shape(), what));
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst.data(), src.data(), src.bytes(), cudaMemcpyHostToDevice));
  return dst;
}

absl::Status CudaBackend::DoCopy(const Tensor& src, Tensor* dst) {
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(dst->data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoFill(float value, Tensor* t) {
  PT_CUDA_RETURN_IF_ERROR(LaunchFill(t->data(), t->numel(), value));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAddInPlace(const Tensor& x, Tensor* y) {
  PT_CUDA_RETURN_IF_ERROR(LaunchAddInPlace(x.data(), y->data(), x.numel()));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAdd(const Tensor& a, const Tensor& b, Tensor* out) {
  PT_CUDA_RETURN_IF_ERROR(LaunchAdd(a.data(), b.data(), out->data(), a.numel()));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                 float alpha, float beta, Tensor* c) {
  const int64_t m = trans_a ? Cols(a) : Rows(a);
  const int64_t k = trans_a ? Rows(a) : Cols(a);
  const int64_t n = trans_b ? Rows(b) : Cols(b);
  if (!options_.bf16_gemm) {
    return impl_->Gemm(trans_a, trans_b, m, n, k, alpha, a.data(), Cols(a), 0, b.data(), Cols(b), 0,
                       beta, c->data(), n, 0, 1);
  }
  PT_ASSIGN_OR_RETURN(void* a16, Scratch(1, std::max<int64_t>(a.numel(), 1) * 2));
  PT_ASSIGN_OR_RETURN(void* b16, Scratch(2, std::max<int64_t>(b.numel(), 1) * 2));
  PT_CUDA_RETURN_IF_ERROR(LaunchToBf16(a.data(), static_cast<uint16_t*>(a16), a.numel()));
  PT_CUDA_RETURN_IF_ERROR(LaunchToBf16(b.data(), static_cast<uint16_t*>(b16), b.numel()));
  PT_CUDA_RETURN_IF_ERROR(cublasGemmEx(
      impl_->handle, Op(trans_b), Op(trans_a), static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, b16, CUDA_R_16BF, static_cast<int>(Cols(b)), a16, CUDA_R_16BF,
      static_cast<int>(Cols(a)), &beta, c->data(), CUDA_R_32F, static_cast<int>(n),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAddBias(const Tensor& bias, Tensor* y) {
  PT_CUDA_RETURN_IF_ERROR(LaunchAddBias(bias.data(), y->data(), Rows(*y), Cols(*y)));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoBiasGrad(const Tensor& dy, bool accumulate, Tensor* db) {
  PT_CUDA_RETURN_IF_ERROR(LaunchBiasGrad(dy.data(), db->data(), Rows(dy), Cols(dy), accumulate));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                                        Tensor* param, Tensor* m, Tensor* v) {
  const int64_t n = grad.numel();
  const float bc1 = 1.0f - std::pow(config.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(config.beta2, static_cast<float>(step));
  PT_CUDA_RETURN_IF_ERROR(LaunchAdamW(param->data(), grad.data(), m->data(), v->data(), n,
                                      config.lr, config.beta1, config.beta2, config.eps,
                                      config.weight_decay, bc1, bc2));
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels::cuda
