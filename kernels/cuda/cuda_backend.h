// CudaBackend: the CUDA implementation of Backend with the CPU backend's semantics. GEMMs (and
// the attention GEMMs, as strided-batched calls over heads) use cuBLAS in fp32, or, with
// CudaBackendOptions::bf16_gemm, bf16 inputs with fp32 accumulation and output for Gemm();
// everything else runs our kernels (cuda_kernels.h). Device memory is cudaMalloc'ed through the
// counting device allocator; host tensors are pinned (cudaMallocHost) for fast offload. Work is
// queued on the legacy default stream; transfers and ops returning host values synchronise.
// Token ids / targets (host spans) are staged through an uncounted device scratch buffer.
// Thread-safety: see Backend (one driving thread; the allocators are thread-safe).
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace pipetrain::kernels::cuda {

struct CudaBackendOptions {
  int device = 0;
  bool bf16_gemm = false;  // Gemm(): bf16 inputs, fp32 accumulate (attention stays fp32)
  int64_t device_budget_bytes = CountingAllocator::kUnlimited;
  int64_t host_budget_bytes = CountingAllocator::kUnlimited;
};

// Number of visible CUDA devices (0 without a driver or GPU).
int CudaDeviceCount();

class CudaBackend : public Backend {
 public:
  // FailedPrecondition when no CUDA device is visible; Internal on cuBLAS init failure.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  absl::string_view name() const override { return "cuda"; }
  CountingAllocator& device_allocator() override { return *device_; }
  CountingAllocator& host_allocator() override { return *host_; }
  absl::Status Synchronize() override;

 private:
  // Backend's ops; the public wrappers in backend.h have checked the arguments.
  absl::Status DoUpload(absl::Span<const float> src, Tensor* dst) override;
  absl::Status DoDownload(const Tensor& src, absl::Span<float> dst) override;
  absl::StatusOr<Tensor> DoCopyToHost(const Tensor& src, absl::string_view what) override;
  absl::StatusOr<Tensor> DoCopyToDevice(const Tensor& src, absl::string_view what) override;
  absl::Status DoCopy(const Tensor& src, Tensor* dst) override;

  absl::Status DoFill(float value, Tensor* t) override;
  absl::Status DoAddInPlace(const Tensor& x, Tensor* y) override;
  absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor* out) override;

  absl::Status DoGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha,
                      float beta, Tensor* c) override;
  absl::Status DoAddBias(const Tensor& bias, Tensor* y) override;
  absl::Status DoBiasGrad(const Tensor& dy, bool accumulate, Tensor* db) override;

  absl::Status DoEmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len, const Tensor& wte,
                                  const Tensor& wpe, Tensor* out) override;
  absl::Status DoEmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len,
                                   const Tensor& dout, bool accumulate, Tensor* dwte,
                                   Tensor* dwpe) override;

  absl::Status DoLayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor* y, Tensor* mean, Tensor* rstd) override;
  absl::Status DoLayerNormBackwardInput(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& mean, const Tensor& rstd,
                                        Tensor* dx) override;
  absl::Status DoLayerNormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                         const Tensor& rstd, bool accumulate, Tensor* dgamma,
                                         Tensor* dbeta) override;

  absl::Status DoGeluForward(const Tensor& x, Tensor* y) override;
  absl::Status DoGeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) override;

  absl::Status DoAttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len, int64_t heads,
                                  Tensor* probs, Tensor* out) override;
  absl::Status DoAttentionBackward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                   int64_t batch, int64_t seq_len, int64_t heads,
                                   Tensor* dqkv) override;

  absl::StatusOr<CrossEntropyResult> DoCrossEntropyForward(const Tensor& logits,
                                                           absl::Span<const int32_t> targets,
                                                           Tensor* probs) override;
  absl::Status DoCrossEntropyBackward(const Tensor& probs, absl::Span<const int32_t> targets,
                                      float grad_scale, Tensor* dlogits) override;

  absl::Status DoAdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                             Tensor* param, Tensor* m, Tensor* v) override;

  struct Impl;
  explicit CudaBackend(const CudaBackendOptions& options);
  // Uncounted device scratch of at least `bytes` (grows, never shrinks).
  absl::StatusOr<void*> Scratch(int slot, size_t bytes);
  absl::StatusOr<const int32_t*> StageIds(absl::Span<const int32_t> ids);

  CudaBackendOptions options_;
  std::unique_ptr<CountingAllocator> device_;
  std::unique_ptr<CountingAllocator> host_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_H_
