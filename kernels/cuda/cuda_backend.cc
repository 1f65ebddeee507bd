// CudaBackend: creation, memory, transfers, cuBLAS GEMMs (row-major via the column-major transpose
// identity C^T = B^T A^T) and the glue to our kernels.
#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_copy_engine.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels::cuda {

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

CudaBackend::Impl::~Impl() {
  ScopedDevice scope(device);
  if (stream != nullptr) cudaStreamSynchronize(stream);
  staging.reset();
  if (handle != nullptr) cublasDestroy(handle);
  // Returns at once; the pool goes once its last allocation has been freed.
  if (pool != nullptr) cudaMemPoolDestroy(pool);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

CudaBackend::CudaBackend(const CudaBackendOptions& options, std::unique_ptr<Impl> impl)
    : options_(options), impl_(std::move(impl)) {
  auto pinned = std::make_unique<CachingRawMemory>(MakePinnedHostMemory(options.device),
                                                   options.max_cached_host_bytes);
  pinned_cache_ = pinned.get();
  device_ = std::make_unique<CountingAllocator>(
      "cuda-device", Location::kDevice,
      MakeStreamOrderedDeviceMemory(options.device, impl_->pool, impl_->stream),
      options.device_budget_bytes);
  host_ = std::make_unique<CountingAllocator>("cuda-pinned-host", Location::kHost,
                                              std::move(pinned), options.host_budget_bytes);
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  const int count = CudaDeviceCount();
  if (options.device < 0 || options.device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", options.device, " not available (", count, " visible devices)"));
  }
  if (options.cublas_workspace_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cublas_workspace_bytes must be >= 0, got ", options.cublas_workspace_bytes));
  }
  PT_CUDA_DEVICE_SCOPE(options.device);
  auto impl = std::make_unique<Impl>(options.device);
  PT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  PT_ASSIGN_OR_RETURN(impl->pool, CreateCachingDevicePool(options.device));
  PT_CUDA_RETURN_IF_ERROR(cublasCreate(&impl->handle));
  PT_CUDA_RETURN_IF_ERROR(cublasSetStream(impl->handle, impl->stream));
  // Deterministic: no atomics-based split-K reductions inside cuBLAS.
  PT_CUDA_RETURN_IF_ERROR(cublasSetAtomicsMode(impl->handle, CUBLAS_ATOMICS_NOT_ALLOWED));
  PT_ASSIGN_OR_RETURN(impl->staging, HostStaging::Create(impl->stream));
  std::unique_ptr<CudaBackend> be(new CudaBackend(options, std::move(impl)));
  // cuBLAS's workspace comes from our counted scratch (after cublasSetStream, which resets it);
  // 0 bytes means none at all rather than cuBLAS's own uncounted pool.
  void* workspace = nullptr;
  if (options.cublas_workspace_bytes > 0) {
    PT_ASSIGN_OR_RETURN(workspace, be->Scratch(kScratchCublas, options.cublas_workspace_bytes,
                                               "the cuBLAS workspace"));
  }
  PT_CUDA_RETURN_IF_ERROR(cublasSetWorkspace(be->impl_->handle, workspace,
                                             static_cast<size_t>(options.cublas_workspace_bytes)));
  return be;
}

CudaBackend::~CudaBackend() {
  ScopedDevice scope(options_.device);
  if (impl_ != nullptr && impl_->stream != nullptr) cudaStreamSynchronize(impl_->stream);
  // Scratch goes back to device_ before the allocators go (then impl_: stream, pool, handle).
  for (ScratchBuffer& s : scratch_) s.Reset();
}

void* CudaBackend::compute_stream() const { return impl_->stream; }

absl::Status CudaBackend::Synchronize() {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CopyEngine>> CudaBackend::NewCopyEngine() {
  return MakeCudaCopyEngine(options_.device, impl_->stream);
}

absl::StatusOr<int64_t> CudaBackend::PoolReservedBytes() const {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  uint64_t reserved = 0;
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemPoolGetAttribute(impl_->pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  return static_cast<int64_t>(reserved);
}

absl::StatusOr<void*> CudaBackend::Scratch(ScratchSlot slot, int64_t bytes, const char* op) {
  ScratchBuffer& buffer = scratch_[slot];
  bytes = std::max<int64_t>(bytes, 1);
  if (buffer.bytes() < bytes) {
    buffer.Reset();  // a stream-ordered free, after the work already queued that used it
    PT_ASSIGN_OR_RETURN(buffer, device_->AllocateScratch(bytes, op));
  }
  return buffer.data();
}

absl::StatusOr<void*> CudaBackend::Stage(ScratchSlot slot, const void* src, int64_t bytes,
                                         const char* op) {
  PT_ASSIGN_OR_RETURN(void* dst, Scratch(slot, bytes, op));
  PT_RETURN_IF_ERROR(impl_->staging->CopyToDevice(src, static_cast<size_t>(bytes), dst));
  return dst;
}

absl::StatusOr<const int32_t*> CudaBackend::StageIds(absl::Span<const int32_t> ids,
                                                     const char* op) {
  PT_ASSIGN_OR_RETURN(void* p, Stage(kScratchIds, ids.data(),
                                     static_cast<int64_t>(ids.size() * sizeof(int32_t)), op));
  return static_cast<const int32_t*>(p);
}

absl::Status CudaBackend::DoUpload(absl::Span<const float> src, Tensor* dst) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  if (src.empty()) return absl::OkStatus();
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->data(), src.data(), src.size() * sizeof(float),
                                          cudaMemcpyHostToDevice, impl_->stream));
  // From pageable memory the runtime has consumed the source when the call returns; from
  // page-locked memory (e.g. a host tensor's) the copy is truly queued, and the caller may reuse
  // the source as soon as we return, so wait for it.
  cudaPointerAttributes attributes;
  PT_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attributes, src.data()));
  if (attributes.type != cudaMemoryTypeUnregistered) {
    PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::DoDownload(const Tensor& src, absl::Span<float> dst) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  if (dst.empty()) return absl::OkStatus();
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst.data(), src.data(), dst.size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, impl_->stream));
  PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CudaBackend::DoCopyToHost(const Tensor& src, absl::string_view what) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_ASSIGN_OR_RETURN(Tensor dst, host_->Allocate(src.shape(), what, src.dtype()));
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToHost, impl_->stream));
  PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  return dst;
}

absl::StatusOr<Tensor> CudaBackend::DoCopyToDevice(const Tensor& src, absl::string_view what) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_ASSIGN_OR_RETURN(Tensor dst, device_->Allocate(src.shape(), what, src.dtype()));
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyHostToDevice, impl_->stream));
  // The caller may free (and the pinned cache reuse) the source as soon as we return.
  PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  return dst;
}

absl::Status CudaBackend::DoCopy(const Tensor& src, Tensor* dst) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  if (src.numel() == 0 || src.data() == dst->data()) return absl::OkStatus();
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->data(), src.data(), src.bytes(),
                                          cudaMemcpyDeviceToDevice, impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoFill(float value, Tensor* t) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(LaunchFill(t->data(), t->numel(), value, impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAddInPlace(const Tensor& x, Tensor* y) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(LaunchAddInPlace(x.data(), y->data(), x.numel(), impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAdd(const Tensor& a, const Tensor& b, Tensor* out) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(LaunchAdd(a.data(), b.data(), out->data(), a.numel(), impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                 float alpha, float beta, Tensor* c) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t m = trans_a ? Cols(a) : Rows(a);
  const int64_t k = trans_a ? Rows(a) : Cols(a);
  const int64_t n = trans_b ? Rows(b) : Cols(b);
  if (!options_.bf16_gemm) {
    return impl_->Gemm(trans_a, trans_b, m, n, k, alpha, a.data(), Cols(a), 0, b.data(), Cols(b), 0,
                       beta, c->data(), n, 0, 1);
  }
  PT_ASSIGN_OR_RETURN(const GemmOperand a16,
                      ProductOperand(a, kScratchBf16A, "Gemm (bf16 copy of a)"));
  PT_ASSIGN_OR_RETURN(const GemmOperand b16,
                      ProductOperand(b, kScratchBf16B, "Gemm (bf16 copy of b)"));
  return impl_->GemmEx(trans_a, trans_b, m, n, k, alpha, a16.data, CUDA_R_16BF, Cols(a), 0,
                       b16.data, CUDA_R_16BF, Cols(b), 0, beta, c->data(), n, 0, 1);
}

absl::StatusOr<CudaBackend::GemmOperand> CudaBackend::ProductOperand(const Tensor& t,
                                                                    ScratchSlot slot,
                                                                    const char* op) {
  if (!options_.bf16_gemm) return GemmOperand{t.data(), 4};
  PT_ASSIGN_OR_RETURN(void* copy, Scratch(slot, t.numel() * 2, op));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchToBf16(t.data(), static_cast<uint16_t*>(copy), t.numel(), impl_->stream));
  return GemmOperand{copy, 2};
}

absl::Status CudaBackend::DoAddBias(const Tensor& bias, Tensor* y) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(LaunchAddBias(bias.data(), y->data(), Rows(*y), Cols(*y), impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoBiasGrad(const Tensor& dy, bool accumulate, Tensor* db) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t rows = Rows(dy), cols = Cols(dy);
  PT_ASSIGN_OR_RETURN(void* partials,
                      Scratch(kScratchColumnPartials,
                              ColumnChunks(rows) * cols * static_cast<int64_t>(sizeof(float)),
                              "BiasGrad (column partial sums)"));
  PT_CUDA_RETURN_IF_ERROR(LaunchBiasGrad(dy.data(), db->data(), rows, cols, accumulate,
                                         static_cast<float*>(partials), impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                                        Tensor* param, Tensor* m, Tensor* v) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t n = grad.numel();
  const float bc1 = 1.0f - std::pow(config.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(config.beta2, static_cast<float>(step));
  PT_CUDA_RETURN_IF_ERROR(LaunchAdamW(param->data(), grad.data(), m->data(), v->data(), n,
                                      config.lr, config.beta1, config.beta2, config.eps,
                                      config.weight_decay, bc1, bc2, impl_->stream));
  return absl::OkStatus();
}

absl::StatusOr<bool> CudaBackend::DoAllFinite(absl::Span<const Tensor* const> tensors) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_ASSIGN_OR_RETURN(void* flag, Scratch(kScratchFlag, sizeof(int32_t), "AllFinite (flag)"));
  PT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flag, 0, sizeof(int32_t), impl_->stream));
  for (const Tensor* t : tensors) {
    PT_CUDA_RETURN_IF_ERROR(
        LaunchFlagNonFinite(t->data(), t->numel(), static_cast<int32_t*>(flag), impl_->stream));
  }
  int32_t host_flag = 0;
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&host_flag, flag, sizeof(int32_t), cudaMemcpyDeviceToHost, impl_->stream));
  // A host value: wait for this backend's stream only.
  PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  return host_flag == 0;
}

absl::StatusOr<double> CudaBackend::DoSumOfSquares(const Tensor& t) {
  // HostSumOfSquares's order, so bitwise the CPU backend's sum: a small tensor (one lane) is
  // copied and summed on the host; a large one is summed per lane on the device (one thread per
  // lane, in element order) and only the lane sums travel, added here in lane order.
  const int64_t lanes = SumOfSquaresLanes(t.numel());
  if (lanes == 1) {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    PT_RETURN_IF_ERROR(DoDownload(t, absl::MakeSpan(host)));
    return HostSumOfSquares(host);
  }
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_ASSIGN_OR_RETURN(void* scratch,
                      Scratch(kScratchLaneSums, lanes * static_cast<int64_t>(sizeof(double)),
                              "SumOfSquares (lane sums)"));
  double* lane_sums = static_cast<double*>(scratch);
  PT_CUDA_RETURN_IF_ERROR(
      LaunchSumOfSquaresLanes(t.data(), t.numel(), lanes, lane_sums, impl_->stream));
  std::vector<double> host(static_cast<size_t>(lanes));
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), lane_sums, lanes * sizeof(double),
                                          cudaMemcpyDeviceToHost, impl_->stream));
  // A host value: wait for this backend's stream only.
  PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  double sum = 0;
  for (const double s : host) sum += s;
  return sum;
}

absl::Status CudaBackend::DoConvert(const Tensor& src, Tensor* dst) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  if (src.dtype() == DType::kF32) {
    PT_CUDA_RETURN_IF_ERROR(LaunchToBf16(src.data(), static_cast<uint16_t*>(dst->raw()),
                                         src.numel(), impl_->stream));
  } else {
    PT_CUDA_RETURN_IF_ERROR(LaunchFromBf16(static_cast<const uint16_t*>(src.raw()), dst->data(),
                                           src.numel(), impl_->stream));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::DoScale(float scale, Tensor* t) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(LaunchScale(t->data(), t->numel(), scale, impl_->stream));
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels::cuda
