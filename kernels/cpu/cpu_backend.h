// CpuBackend: the fp32 CPU implementation of Backend. GEMMs go through oneDNN or OpenBLAS, chosen
// per shape (gemm_router.h), with an explicitly set thread count (and OpenBLAS kernels matching
// the CPU, openblas_kernels.h); everything else goes through a VectorKernels table
// (vector_kernels.h: AVX-512 or AVX2/FMA intrinsics when the CPU has them, else portable loops),
// in a fixed order, so results are bitwise reproducible run to run. "Device" memory is 64-byte
// aligned RAM counted by device_allocator() (optionally with a budget); host_allocator() counts
// offloaded bytes.
// Thread-safety: see Backend. openblas_set_num_threads is process-wide: the constructor sets it,
// so all CpuBackends in one process should agree on blas_threads.
#ifndef PIPETRAIN_KERNELS_CPU_CPU_BACKEND_H_
#define PIPETRAIN_KERNELS_CPU_CPU_BACKEND_H_

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/gemm_router.h"
#include "kernels/cpu/vector_kernels.h"

namespace pipetrain::kernels {

struct CpuBackendOptions {
  int blas_threads = 1;  // OpenBLAS threads (results are deterministic for a fixed value)
  int64_t device_budget_bytes = CountingAllocator::kUnlimited;
  int64_t host_budget_bytes = CountingAllocator::kUnlimited;
  // Gemm() and the attention products: inputs rounded to bf16 (into counted scratch), fp32
  // accumulation and output: the numerics of a bf16 job's GEMMs on a GPU, so a CPU worker can
  // run a bf16 job (the softmax and its backward stay fp32, as there).
  bool bf16_gemm = false;
  // Freed device blocks up to this many bytes are kept for reuse by requests of the same size
  // (caching_memory.h): a step allocates the same activation sizes every microbatch, and fresh
  // pages from the system cost a page fault and a zeroing each (measured ~6% of a hidden-256
  // step's profile). Counting and budgets are unaffected (cached blocks are not in use).
  int64_t device_cache_bytes = int64_t{512} << 20;
  // Use the portable loops even where AVX2/FMA is available (tests; results differ from the
  // AVX2 table in the last bits).
  bool portable_kernels = false;
  // Which BLAS runs each GEMM (gemm_router.h): per shape by default; one library only for tests and
  // benchmarks that compare them.
  GemmRouting gemm_routing = GemmRouting::kPerShape;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options = {});

  absl::string_view name() const override { return "cpu"; }
  // "avx512", "avx2-fma" or "portable".
  absl::string_view vector_kernels_name() const { return vk_->name; }
  // OpenBLAS's kernel set (openblas_kernels.h), e.g. "SkylakeX", "Haswell", "Zen".
  const std::string& blas_core() const { return blas_core_; }
  CountingAllocator& device_allocator() override { return device_; }
  CountingAllocator& host_allocator() override { return host_; }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  // memcpy, no fence: compute has finished when an op returns.
  absl::StatusOr<std::unique_ptr<CopyEngine>> NewCopyEngine() override {
    return MakeMemcpyCopyEngine();
  }

 private:
  // Backend's ops; the public wrappers in backend.h have checked the arguments.
  absl::Status DoUpload(absl::Span<const float> src, Tensor* dst) override;
  absl::Status DoDownload(const Tensor& src, absl::Span<float> dst) override;
  absl::StatusOr<Tensor> DoCopyToHost(const Tensor& src, absl::string_view what) override;
  absl::StatusOr<Tensor> DoCopyToDevice(const Tensor& src, absl::string_view what) override;
  absl::Status DoCopy(const Tensor& src, Tensor* dst) override;
  absl::Status DoConvert(const Tensor& src, Tensor* dst) override;

  absl::Status DoFill(float value, Tensor* t) override;
  absl::Status DoAddInPlace(const Tensor& x, Tensor* y) override;
  absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor* out) override;

  absl::Status DoGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha,
                      float beta, Tensor* c) override;
  absl::Status DoAddBias(const Tensor& bias, Tensor* y) override;
  absl::Status DoBiasRows(const Tensor& bias, const Tensor* residual, Tensor* out) override;
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
                                        const Tensor* residual, Tensor* dx) override;
  absl::Status DoLayerNormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                         const Tensor& rstd, bool accumulate, Tensor* dgamma,
                                         Tensor* dbeta) override;

  absl::Status DoGeluForward(const Tensor& x, Tensor* y) override;
  absl::Status DoGeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) override;

  absl::Status DoAttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len, int64_t heads,
                                  Tensor* out) override;
  absl::Status DoAttentionBackward(const Tensor& dout, const Tensor& qkv, int64_t batch,
                                   int64_t seq_len, int64_t heads, Tensor* dqkv) override;

  absl::StatusOr<CrossEntropyResult> DoCrossEntropyForward(const Tensor& logits,
                                                           absl::Span<const int32_t> targets,
                                                           Tensor* probs) override;
  absl::Status DoCrossEntropyBackward(const Tensor& probs, absl::Span<const int32_t> targets,
                                      float grad_scale, Tensor* dlogits) override;

  absl::StatusOr<bool> DoAllFinite(absl::Span<const Tensor* const> tensors) override;
  absl::StatusOr<double> DoSumOfSquares(const Tensor& t) override;
  absl::Status DoScale(float scale, Tensor* t) override;
  absl::Status DoAdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                             Tensor* param, Tensor* m, Tensor* v) override;
  // An input of a matrix product (Gemm's, attention's) as it reads it: t's data, or with
  // bf16_gemm its copy rounded to bf16 in `buffer` (counted scratch named `what`).
  absl::StatusOr<const float*> ProductInput(const Tensor& t, const char* what,
                                            ScratchBuffer* buffer);

  CountingAllocator device_;
  CountingAllocator host_;
  bool bf16_gemm_;
  const VectorKernels* vk_;
  GemmRouter gemm_;
  std::string blas_core_;
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_CPU_BACKEND_H_
