// CudaBackend: the CUDA implementation of Backend with the CPU backend's semantics. GEMMs (and
// the attention GEMMs, as strided-batched calls over heads) use cuBLAS in fp32, or, with
// CudaBackendOptions::bf16_gemm, bf16 inputs (tensor cores) with fp32 accumulation and output:
// Gemm() and every attention product (q, k, v, the probabilities, the output gradient and the
// score gradients rounded to bf16 where a product reads them; the softmax and its backward stay
// fp32). Everything else runs our kernels (cuda_kernels.h).
//
// Streams. All work goes to the backend's own non-blocking compute stream (the cuBLAS handle is
// bound to it), never the legacy default stream, so it neither waits for nor blocks other
// streams (NCCL, offload copies, other backends). Synchronize() waits for that stream only, and
// so does every op that returns host values (ToVector, Download, CopyToHost, CopyToDevice,
// CrossEntropyForward). Host inputs of kernels (token ids, targets) go through pinned staging
// (host_staging.h) without waiting for the stream.
//
// Memory (cuda_memory.h). Device tensors are allocated stream-ordered on the compute stream from
// a pool of the backend's own that keeps freed memory cached, so a free never synchronises the
// device; host tensors are pinned and cached by size (kernels/caching_memory.h). Everything the
// backend holds on the device is counted by device_allocator(): tensors, and as scratch the cuBLAS
// workspace and every op's scratch (attention backward's heads x T^2 score gradients, bf16 GEMM
// input copies, staged ids, reduction partials), so bytes in use and the peak are the truth and a
// budget refuses a scratch buffer with ResourceExhausted naming the op.
//
// Device per thread. The device is selected per thread by the CUDA runtime; every entry point
// (ops, allocator calls, copy engines, Synchronize, destruction) makes options.device current on
// the calling thread for its duration (cuda_device.h), so a backend on device 1 driven from any
// thread works on device 1.
// Thread-safety: see Backend (one driving thread at a time; allocators and copy engines are
// thread-safe as documented there).
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_H_

#include <array>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/caching_memory.h"
#include "kernels/scratch_buffer.h"

namespace pipetrain::kernels::cuda {

struct CudaBackendOptions {
  int device = 0;
  bool bf16_gemm = false;  // every GEMM, attention's included: bf16 inputs, fp32 accumulate
  int64_t device_budget_bytes = CountingAllocator::kUnlimited;
  int64_t host_budget_bytes = CountingAllocator::kUnlimited;
  // cuBLAS workspace, counted as scratch (32 MiB is what cuBLAS asks for on Hopper); 0 = none
  // (never cuBLAS's own, uncounted, pool).
  int64_t cublas_workspace_bytes = int64_t{32} << 20;
  // Freed pinned host blocks kept for reuse, at most this many bytes.
  int64_t max_cached_host_bytes = int64_t{8} << 30;
};

// Number of visible CUDA devices (0 without a driver or GPU).
int CudaDeviceCount();

class CudaBackend : public Backend {
 public:
  // FailedPrecondition when no CUDA device is visible; ResourceExhausted when the device budget
  // cannot hold the cuBLAS workspace; Internal on a CUDA or cuBLAS init failure.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  absl::string_view name() const override { return "cuda"; }
  CountingAllocator& device_allocator() override { return *device_; }
  CountingAllocator& host_allocator() override { return *host_; }
  absl::Status Synchronize() override;
  absl::StatusOr<std::unique_ptr<CopyEngine>> NewCopyEngine() override;

  int device() const { return options_.device; }
  // The compute stream (a cudaStream_t), for tests and for code that must order its own work
  // against this backend's.
  void* compute_stream() const;
  // Device bytes the stream-ordered pool holds from the driver (in use + cached after frees).
  absl::StatusOr<int64_t> PoolReservedBytes() const;
  CachingMemoryStats pinned_host_cache() const { return pinned_cache_->stats(); }

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

  absl::Status DoAdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                             Tensor* param, Tensor* m, Tensor* v) override;
  absl::StatusOr<bool> DoAllFinite(absl::Span<const Tensor* const> tensors) override;
  absl::StatusOr<double> DoSumOfSquares(const Tensor& t) override;
  absl::Status DoScale(float scale, Tensor* t) override;

  // One scratch buffer per use, so that buffers used by one op never alias another's.
  enum ScratchSlot : int {
    kScratchIds,   // staged token ids / targets
    kScratchPlan,  // staged embedding gradient plan
    kScratchEmbedPartials,
    kScratchColumnPartials,
    kScratchBf16A,
    kScratchBf16B,
    kScratchRowLoss,
    kScratchArgmax,
    kScratchAttention,       // attention backward's score gradients, heads x T^2
    kScratchAttentionProbs,  // one batch row's attention probabilities, heads x T^2
    kScratchAttentionP16,    // bf16_gemm: their bf16 copy
    kScratchAttentionDs16,   // bf16_gemm: the score gradients' bf16 copy
    kScratchQkv16,           // bf16_gemm: the bf16 copy of qkv the attention products read
    kScratchDout16,          // bf16_gemm: the bf16 copy of the attention output's gradient
    kScratchCublas,     // the cuBLAS workspace
    kScratchFlag,       // AllFinite's non-finite flag (one int32)
    kScratchLaneSums,   // SumOfSquares's per-lane sums (doubles)
    kNumScratchSlots,
  };

  struct Impl;
  CudaBackend(const CudaBackendOptions& options, std::unique_ptr<Impl> impl);
  // Counted device scratch of at least `bytes` for `op` (grows, never shrinks; a grown buffer's
  // old memory is freed in stream order, after the work that used it).
  absl::StatusOr<void*> Scratch(ScratchSlot slot, int64_t bytes, const char* op);
  // Copies host data to the device scratch `slot` in stream order (host_staging.h).
  absl::StatusOr<void*> Stage(ScratchSlot slot, const void* src, int64_t bytes, const char* op);
  absl::StatusOr<const int32_t*> StageIds(absl::Span<const int32_t> ids, const char* op);
  // An input of a matrix product (Gemm's, attention's) as it reads it: the fp32 tensor itself,
  // or with bf16_gemm its bf16 copy in scratch `slot` (every product of a bf16 job has bf16
  // inputs).
  struct GemmOperand {
    const void* data = nullptr;
    int element_bytes = 4;  // 4: fp32, 2: bf16
    const void* At(int64_t element) const {
      return static_cast<const char*>(data) + element * element_bytes;
    }
  };
  absl::StatusOr<GemmOperand> ProductOperand(const Tensor& t, ScratchSlot slot, const char* op);
  // Batch row b's attention probabilities (heads x T x T, causal softmax of the scaled scores of
  // qkv, an [N, h3] operand): fp32 in the kScratchAttentionProbs scratch (which first holds the
  // scores; with keep_fp32 false and bf16_gemm only the bf16 copy is written) and the operand
  // the next products read (the bf16 copy in kScratchAttentionP16, or the fp32 values). The
  // forward's and, recomputed bit for bit by the same calls, the backward's: nothing T x T is
  // kept between passes.
  struct Probabilities {
    const float* fp32 = nullptr;
    GemmOperand operand;
  };
  absl::StatusOr<Probabilities> AttentionProbabilities(const GemmOperand& qkv, int64_t h3,
                                                       int64_t b, int64_t seq_len, int64_t heads,
                                                       bool keep_fp32, const char* op);

  CudaBackendOptions options_;
  // Declared first, destroyed last: the stream, the pool and the cuBLAS handle outlive every
  // allocation and every free.
  std::unique_ptr<Impl> impl_;
  CachingRawMemory* pinned_cache_ = nullptr;  // owned by host_
  std::unique_ptr<CountingAllocator> device_;
  std::unique_ptr<CountingAllocator> host_;
  // Declared last, destroyed first: returned to device_ before it goes.
  std::array<ScratchBuffer, kNumScratchSlots> scratch_;
};

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_BACKEND_H_
