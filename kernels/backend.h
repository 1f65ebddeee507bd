// Backend: the compute interface every worker stage runs on. One implementation per device kind
// (kernels/cpu: OpenBLAS + plain C++; kernels/cuda: cuBLAS + our CUDA kernels) with identical
// semantics. Every op computes on fp32 tensors (bf16 ones exist only as the stash, converted by
// ToBf16/ToF32 and moved by the copies), contiguous and row-major; "[N,D]" below means a tensor whose
// last dimension is D and whose other dimensions multiply to N (leading dims are flattened).
// Device tensors come from device_allocator() (counted; can enforce a budget), host tensors
// (offload targets) from host_allocator(). Ops validate shapes and locations and return
// InvalidArgument on a mismatch; they never allocate tensors for their results (the caller
// passes preallocated outputs), only the scratch a backend needs, which the device allocator
// counts as scratch (a budget that cannot hold it makes the op fail with ResourceExhausted naming
// it). The checks are written once, in the public ops here (backend.cc); a backend overrides the
// private Do* methods, which only compute, so the CPU tests of the checks cover every backend.
// Ops may run asynchronously (CUDA: queued on the backend's compute stream); an op that returns
// host values (ToVector, Download, CrossEntropyForward) has waited for what it reads.
// Determinism: for a fixed backend configuration every op is bitwise deterministic (no atomics in
// reductions, fixed BLAS thread count, reduction shapes that depend on the op's shape only).
// Thread-safety: a Backend instance must be driven by one thread at a time (CUDA: one compute
// stream and one cuBLAS handle; CPU: OpenBLAS thread settings are process-wide), which need not
// be the thread that created it. The allocators are thread-safe; copy engines (NewCopyEngine) are
// driven by their own threads (copy_engine.h).
#ifndef PIPETRAIN_KERNELS_BACKEND_H_
#define PIPETRAIN_KERNELS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/allocator.h"
#include "kernels/copy_engine.h"
#include "kernels/tensor.h"

namespace pipetrain::kernels {

// Decoupled-weight-decay Adam (Loshchilov & Hutter):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mh = m/(1-b1^t);  vh = v/(1-b2^t)
//   p -= lr * (mh / (sqrt(vh) + eps) + weight_decay * p)
struct AdamWConfig {
  // No defaults here: a job's settings (and their defaults) come from its spec
  // (model/job_model.h); every caller sets every field.
  float lr = 0;
  float beta1 = 0;
  float beta2 = 0;
  float eps = 0;
  float weight_decay = 0;
};

// Layernorm epsilon used by every backend.
inline constexpr float kLayerNormEps = 1e-5f;

// Target id meaning "no loss at this position" in CrossEntropy*.
inline constexpr int32_t kIgnoreTarget = -1;

// The sum of squares as Backend::SumOfSquares defines it, over host memory. Element i goes to
// lane i % L (L = SumOfSquaresLanes(n)); each lane adds its squares in double in element order,
// then the lanes are added in lane order. One lane below 8192 elements: plain element order.
// Lanes exist so a GPU can compute the same bits with one thread per lane, every load coalesced.
double HostSumOfSquares(absl::Span<const float> values);
// Lanes for n elements: 1 below 8192, else the largest power of two <= n / 4096, at most 2^16.
int64_t SumOfSquaresLanes(int64_t n);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual absl::string_view name() const = 0;
  virtual CountingAllocator& device_allocator() = 0;
  virtual CountingAllocator& host_allocator() = 0;
  // Waits for all work queued on this backend (no-op on CPU); not for other backends' work.
  virtual absl::Status Synchronize() = 0;
  // A new engine for one offload copy thread (copy_engine.h): CPU memcpy; CUDA its own copy
  // stream ordered after the compute stream by events.
  virtual absl::StatusOr<std::unique_ptr<CopyEngine>> NewCopyEngine() = 0;

  // ---- Allocation helpers (device memory, counted) ----
  absl::StatusOr<Tensor> Empty(const Shape& shape, absl::string_view what);
  absl::StatusOr<Tensor> Zeros(const Shape& shape, absl::string_view what);
  // A device tensor holding `values` (values.size() must equal NumElements(shape)).
  absl::StatusOr<Tensor> FromHost(const Shape& shape, absl::Span<const float> values,
                                  absl::string_view what);
  // All elements of a device or host tensor, copied to a std::vector.
  absl::StatusOr<std::vector<float>> ToVector(const Tensor& t);

  // ---- Transfers ----
  // Raw host memory <-> device tensor (numel floats).
  absl::Status Upload(absl::Span<const float> src, Tensor* dst);
  absl::Status Download(const Tensor& src, absl::Span<float> dst);
  // Device -> newly allocated host tensor (host_allocator) and back (device_allocator). `src`
  // keeps its memory; callers Reset() it to actually free it (offload).
  absl::StatusOr<Tensor> CopyToHost(const Tensor& src, absl::string_view what);
  absl::StatusOr<Tensor> CopyToDevice(const Tensor& src, absl::string_view what);
  // Device -> device copy of equal element counts.
  absl::Status Copy(const Tensor& src, Tensor* dst);
  // A new device tensor of src's shape holding src (a device f32 tensor) rounded to bf16
  // (kernels/bf16.h), and back: the bf16 activation stash. ToF32 is exact.
  absl::StatusOr<Tensor> ToBf16(const Tensor& src, absl::string_view what);
  absl::StatusOr<Tensor> ToF32(const Tensor& src, absl::string_view what);

  // ---- Elementwise ----
  absl::Status Fill(float value, Tensor* t);
  // y += x (same numel).
  absl::Status AddInPlace(const Tensor& x, Tensor* y);
  // out = a + b (residual add; out may alias a or b).
  absl::Status Add(const Tensor& a, const Tensor& b, Tensor* out);

  // ---- GEMM ----
  // c = alpha * op(a) @ op(b) + beta * c, with a, b, c viewed as 2-D [rows, last dim] and op()
  // an optional transpose. beta = 1 accumulates into c (e.g. weight-gradient buffers); beta = 0
  // ignores c's previous content.
  absl::Status Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha,
                    float beta, Tensor* c);
  // y[N,D] += bias[D] broadcast over rows.
  absl::Status AddBias(const Tensor& bias, Tensor* y);
  // out[N,D] = bias[D] on every row, plus residual[N,D] when residual is not null: the value a
  // linear layer's Gemm with beta = 1 starts from, so neither the bias nor a residual add needs a
  // pass of its own over the output (nor the GEMM its zeroing pass).
  absl::Status BiasRows(const Tensor& bias, const Tensor* residual, Tensor* out);
  // out[N,D] = residual + bias + x[N,K] @ w[K,D] (residual optional): BiasRows, then Gemm with
  // beta = 1. Rounded as (residual + bias) + the product's partial sums in the BLAS's order.
  absl::Status Linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor* residual,
                      Tensor* out);
  // db[D] (+)= sum over rows of dy[N,D]; accumulate=false overwrites db.
  absl::Status BiasGrad(const Tensor& dy, bool accumulate, Tensor* db);

  // ---- Embedding ----
  // out[n,:] = wte[ids[n],:] + wpe[n % seq_len,:]; ids.size() = N, wte [V,H], wpe [>=seq_len,H].
  // Out-of-range ids are InvalidArgument.
  absl::Status EmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len, const Tensor& wte,
                                const Tensor& wpe, Tensor* out);
  // dwte[ids[n],:] (+)= dout[n,:]; dwpe[n % seq_len,:] (+)= dout[n,:], summed in token order.
  absl::Status EmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len, const Tensor& dout,
                                 bool accumulate, Tensor* dwte, Tensor* dwpe);

  // ---- LayerNorm over the last dimension (eps = kLayerNormEps, biased variance) ----
  // y = (x - mean) * rstd * gamma + beta; mean, rstd: [N] saved for the backward pass.
  absl::Status LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor* y,
                                Tensor* mean, Tensor* rstd);
  // Input gradient only (B): dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma,
  // plus `residual` (same shape as x) when given: a pre-LN block's skip-connection gradient,
  // added in the same pass over memory.
  absl::Status LayerNormBackwardInput(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                      const Tensor& mean, const Tensor& rstd, Tensor* dx,
                                      const Tensor* residual = nullptr);
  // Weight gradients only (W): dgamma (+)= sum_rows dy * xhat, dbeta (+)= sum_rows dy.
  absl::Status LayerNormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                       const Tensor& rstd, bool accumulate, Tensor* dgamma,
                                       Tensor* dbeta);

  // ---- GELU, tanh approximation: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ----
  absl::Status GeluForward(const Tensor& x, Tensor* y);
  // dx = dy * gelu'(x) (the exact derivative of the tanh approximation).
  absl::Status GeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx);

  // ---- Causal multi-head self-attention ----
  // qkv [batch*seq_len, 3H] holds per token [q | k | v], head h using columns h*hd..(h+1)*hd of
  // each third (hd = H / heads). out [batch*seq_len, H] = P v with heads concatenated, P the
  // masked softmax of q k^T / sqrt(hd). P (seq_len x seq_len per head) lives only in scratch:
  // nothing but qkv needs to be kept for the backward, which recomputes P.
  absl::Status AttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len, int64_t heads,
                                Tensor* out);
  // dqkv [batch*seq_len, 3H] (overwritten) from dout and qkv; P is recomputed with the forward's
  // own arithmetic, so it is bitwise the forward's.
  absl::Status AttentionBackward(const Tensor& dout, const Tensor& qkv, int64_t batch,
                                 int64_t seq_len, int64_t heads, Tensor* dqkv);

  // ---- Cross-entropy with logits (mean over non-ignored positions) ----
  struct CrossEntropyResult {
    double loss = 0;                   // mean over valid targets of -log softmax(logits)[target]
    int64_t valid_targets = 0;         // targets != kIgnoreTarget
    std::vector<int32_t> predictions;  // argmax of each row (first max), size N
  };
  // logits [N,V], targets.size() = N (kIgnoreTarget or in [0,V)); probs [N,V] receives softmax.
  absl::StatusOr<CrossEntropyResult> CrossEntropyForward(const Tensor& logits,
                                                         absl::Span<const int32_t> targets,
                                                         Tensor* probs);
  // dlogits = grad_scale * (probs - onehot(target)) / valid_targets for valid rows, 0 for
  // ignored rows (dlogits may alias probs).
  absl::Status CrossEntropyBackward(const Tensor& probs, absl::Span<const int32_t> targets,
                                    float grad_scale, Tensor* dlogits);

  // ---- Optimizer ----
  // One AdamW step on param with grad and moments m, v (all same numel); step >= 1.
  absl::Status AdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                           Tensor* param, Tensor* m, Tensor* v);
  // Whether every element of every tensor (device tensors, none empty) is finite: no NaN, no
  // Inf. The optimizer's check before an update; returns a host value, so it waits for what it
  // reads (CUDA: one wait for all the tensors).
  absl::StatusOr<bool> AllFinite(absl::Span<const Tensor* const> tensors);
  // The sum of the squares of t's elements (a device tensor), each squared in double and added in
  // the fixed order HostSumOfSquares defines: the same bits on every backend (CUDA sums the
  // lanes on the device and adds them on the host; a host value, so it waits for what it
  // reads). Gradient clipping's per-parameter norm term.
  absl::StatusOr<double> SumOfSquares(const Tensor& t);
  // t *= scale, elementwise in float (gradient clipping).
  absl::Status Scale(float scale, Tensor* t);

 private:
  // The implementations behind the ops above. The public op has already checked every argument
  // (locations, shapes, ids, counts) as documented there, so an implementation only computes.
  // DoGemm is not called when c is empty (m or n is 0); k may be 0.
  virtual absl::Status DoUpload(absl::Span<const float> src, Tensor* dst) = 0;
  virtual absl::Status DoDownload(const Tensor& src, absl::Span<float> dst) = 0;
  virtual absl::StatusOr<Tensor> DoCopyToHost(const Tensor& src, absl::string_view what) = 0;
  virtual absl::StatusOr<Tensor> DoCopyToDevice(const Tensor& src, absl::string_view what) = 0;
  virtual absl::Status DoCopy(const Tensor& src, Tensor* dst) = 0;
  // dst has src's numel and the other dtype (f32 <-> bf16).
  virtual absl::Status DoConvert(const Tensor& src, Tensor* dst) = 0;
  virtual absl::Status DoFill(float value, Tensor* t) = 0;
  virtual absl::Status DoAddInPlace(const Tensor& x, Tensor* y) = 0;
  virtual absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor* out) = 0;
  virtual absl::Status DoGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                              float alpha, float beta, Tensor* c) = 0;
  virtual absl::Status DoAddBias(const Tensor& bias, Tensor* y) = 0;
  // Default: Copy (or Fill 0) and AddBias, two passes; a backend may do it in one.
  virtual absl::Status DoBiasRows(const Tensor& bias, const Tensor* residual, Tensor* out);
  virtual absl::Status DoBiasGrad(const Tensor& dy, bool accumulate, Tensor* db) = 0;
  virtual absl::Status DoEmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len,
                                          const Tensor& wte, const Tensor& wpe, Tensor* out) = 0;
  virtual absl::Status DoEmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len,
                                           const Tensor& dout, bool accumulate, Tensor* dwte,
                                           Tensor* dwpe) = 0;
  virtual absl::Status DoLayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          Tensor* y, Tensor* mean, Tensor* rstd) = 0;
  virtual absl::Status DoLayerNormBackwardInput(const Tensor& dy, const Tensor& x,
                                                const Tensor& gamma, const Tensor& mean,
                                                const Tensor& rstd, const Tensor* residual,
                                                Tensor* dx) = 0;
  virtual absl::Status DoLayerNormBackwardWeight(const Tensor& dy, const Tensor& x,
                                                 const Tensor& mean, const Tensor& rstd,
                                                 bool accumulate, Tensor* dgamma,
                                                 Tensor* dbeta) = 0;
  virtual absl::Status DoGeluForward(const Tensor& x, Tensor* y) = 0;
  virtual absl::Status DoGeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) = 0;
  virtual absl::Status DoAttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len,
                                          int64_t heads, Tensor* out) = 0;
  virtual absl::Status DoAttentionBackward(const Tensor& dout, const Tensor& qkv, int64_t batch,
                                           int64_t seq_len, int64_t heads, Tensor* dqkv) = 0;
  virtual absl::StatusOr<CrossEntropyResult> DoCrossEntropyForward(
      const Tensor& logits, absl::Span<const int32_t> targets, Tensor* probs) = 0;
  virtual absl::Status DoCrossEntropyBackward(const Tensor& probs,
                                              absl::Span<const int32_t> targets, float grad_scale,
                                              Tensor* dlogits) = 0;
  virtual absl::Status DoAdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                                     Tensor* param, Tensor* m, Tensor* v) = 0;
  virtual absl::StatusOr<bool> DoAllFinite(absl::Span<const Tensor* const> tensors) = 0;
  virtual absl::StatusOr<double> DoSumOfSquares(const Tensor& t) = 0;
  virtual absl::Status DoScale(float scale, Tensor* t) = 0;
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_BACKEND_H_
