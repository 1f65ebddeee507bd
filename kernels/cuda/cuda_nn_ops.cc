// CudaBackend: embedding, layernorm, GELU, attention (cuBLAS strided-batched GEMMs over heads +
// our masked softmax kernels) and cross-entropy.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/status_macros.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/embedding_grad_plan.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels::cuda {

absl::Status CudaBackend::DoEmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len,
                                             const Tensor& wte, const Tensor& wpe, Tensor* out) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t h = Cols(wte);
  PT_ASSIGN_OR_RETURN(const int32_t* d_ids, StageIds(ids, "EmbeddingForward (token ids)"));
  PT_CUDA_RETURN_IF_ERROR(LaunchEmbeddingForward(d_ids, n, seq_len, wte.data(), wpe.data(),
                                                 out->data(), h, impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoEmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len,
                                              const Tensor& dout, bool accumulate, Tensor* dwte,
                                              Tensor* dwpe) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t h = Cols(*dwte);
  if (!accumulate) {
    PT_RETURN_IF_ERROR(Fill(0.0f, dwte));
    PT_RETURN_IF_ERROR(Fill(0.0f, dwpe));
  }
  // Table: tokens grouped by id on the host, summed in a fixed order (embedding_grad_plan.h).
  const EmbeddingGradPlan plan = BuildEmbeddingGradPlan(ids, Rows(*dwte));
  PT_ASSIGN_OR_RETURN(void* d_plan,
                      Stage(kScratchPlan, plan.packed.data(),
                            static_cast<int64_t>(plan.packed.size() * sizeof(int32_t)),
                            "EmbeddingBackward (gradient plan)"));
  float* partials = nullptr;
  if (plan.num_segments > 0) {
    PT_ASSIGN_OR_RETURN(
        void* p,
        Scratch(kScratchEmbedPartials, plan.num_segments * h * static_cast<int64_t>(sizeof(float)),
                "EmbeddingBackward (segment partial sums)"));
    partials = static_cast<float*>(p);
  }
  PT_CUDA_RETURN_IF_ERROR(
      LaunchEmbeddingBackwardTable(static_cast<const int32_t*>(d_plan), plan.rows_offset(),
                                   plan.num_rows, plan.segments_offset(), plan.num_segments,
                                   dout.data(), dwte->data(), h, partials, impl_->stream));
  // Positions: each (position, column) sums its batch's tokens in token order.
  PT_CUDA_RETURN_IF_ERROR(
      LaunchEmbeddingBackwardPositions(dout.data(), n, seq_len, dwpe->data(), h, impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoLayerNormForward(const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, Tensor* y, Tensor* mean,
                                             Tensor* rstd) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t rows = Rows(x), h = Cols(x);
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormForward(x.data(), gamma.data(), beta.data(), y->data(),
                                                 mean->data(), rstd->data(), rows, h, kLayerNormEps,
                                                 impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoLayerNormBackwardInput(const Tensor& dy, const Tensor& x,
                                                   const Tensor& gamma, const Tensor& mean,
                                                   const Tensor& rstd, const Tensor* residual,
                                                   Tensor* dx) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t rows = Rows(x), h = Cols(x);
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormBackwardInput(dy.data(), x.data(), gamma.data(),
                                                       mean.data(), rstd.data(), dx->data(), rows,
                                                       h, impl_->stream));
  // The residual in a second kernel (same rounding: the gradient is a float before the add).
  if (residual != nullptr) {
    PT_CUDA_RETURN_IF_ERROR(
        LaunchAddInPlace(residual->data(), dx->data(), dx->numel(), impl_->stream));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::DoLayerNormBackwardWeight(const Tensor& dy, const Tensor& x,
                                                    const Tensor& mean, const Tensor& rstd,
                                                    bool accumulate, Tensor* dgamma,
                                                    Tensor* dbeta) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t rows = Rows(x), h = Cols(x);
  PT_ASSIGN_OR_RETURN(void* partials,
                      Scratch(kScratchColumnPartials,
                              2 * ColumnChunks(rows) * h * static_cast<int64_t>(sizeof(float)),
                              "LayerNormBackwardWeight (column partial sums)"));
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormBackwardWeight(
      dy.data(), x.data(), mean.data(), rstd.data(), dgamma->data(), dbeta->data(), rows, h,
      accumulate, static_cast<float*>(partials), impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoGeluForward(const Tensor& x, Tensor* y) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(LaunchGeluForward(x.data(), y->data(), x.numel(), impl_->stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoGeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  PT_CUDA_RETURN_IF_ERROR(
      LaunchGeluBackward(dy.data(), x.data(), dx->data(), x.numel(), impl_->stream));
  return absl::OkStatus();
}

absl::StatusOr<CudaBackend::Probabilities> CudaBackend::AttentionProbabilities(
    const GemmOperand& qkv, int64_t h3, int64_t b, int64_t seq_len, int64_t heads, bool keep_fp32,
    const char* op) {
  const int64_t h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  PT_ASSIGN_OR_RETURN(void* scratch,
                      Scratch(kScratchAttentionProbs,
                              heads * t * t * static_cast<int64_t>(sizeof(float)), op));
  float* p = static_cast<float*>(scratch);
  Probabilities result{p, GemmOperand{p, 4}};
  uint16_t* p16 = nullptr;
  if (options_.bf16_gemm) {
    PT_ASSIGN_OR_RETURN(void* copy, Scratch(kScratchAttentionP16, heads * t * t * 2, op));
    p16 = static_cast<uint16_t*>(copy);
    result.operand = GemmOperand{p16, 2};
  }
  // S_h = scale * Q_h K_h^T for all heads h (stride hd between heads inside a row).
  const int64_t q = b * t * h3;
  const cudaDataType type = TypeOf(qkv.element_bytes);
  PT_RETURN_IF_ERROR(impl_->GemmEx(false, true, t, t, hd, scale, qkv.At(q), type, h3, hd,
                                   qkv.At(q + h), type, h3, hd, 0.0f, p, t, t * t, heads));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchCausalSoftmax(p, heads * t, t, p16, keep_fp32 || p16 == nullptr, impl_->stream));
  return result;
}

absl::Status CudaBackend::DoAttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len,
                                             int64_t heads, Tensor* out) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  PT_ASSIGN_OR_RETURN(const GemmOperand in,
                      ProductOperand(qkv, kScratchQkv16, "AttentionForward (bf16 copy of qkv)"));
  const cudaDataType type = TypeOf(in.element_bytes);
  for (int64_t b = 0; b < batch; ++b) {
    PT_ASSIGN_OR_RETURN(const Probabilities p,
                        AttentionProbabilities(in, h3, b, t, heads, /*keep_fp32=*/false,
                                               "AttentionForward (probabilities, heads x T^2)"));
    // O = P V
    PT_RETURN_IF_ERROR(impl_->GemmEx(false, false, t, hd, t, 1.0f, p.operand.data,
                                     TypeOf(p.operand.element_bytes), t, t * t,
                                     in.At(b * t * h3 + 2 * h), type, h3, hd, 0.0f,
                                     out->data() + b * t * h, h, hd, heads));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAttentionBackward(const Tensor& dout, const Tensor& qkv,
                                              int64_t batch, int64_t seq_len, int64_t heads,
                                              Tensor* dqkv) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  PT_ASSIGN_OR_RETURN(const GemmOperand in,
                      ProductOperand(qkv, kScratchQkv16, "AttentionBackward (bf16 copy of qkv)"));
  PT_ASSIGN_OR_RETURN(
      const GemmOperand dO,
      ProductOperand(dout, kScratchDout16, "AttentionBackward (bf16 copy of the gradient)"));
  const cudaDataType type = TypeOf(in.element_bytes);
  PT_ASSIGN_OR_RETURN(
      void* scratch, Scratch(kScratchAttention, heads * t * t * static_cast<int64_t>(sizeof(float)),
                             "AttentionBackward (score gradients, heads x T^2)"));
  float* ds = static_cast<float*>(scratch);
  GemmOperand dS{ds, 4};
  uint16_t* ds16 = nullptr;
  if (options_.bf16_gemm) {
    PT_ASSIGN_OR_RETURN(void* copy,
                        Scratch(kScratchAttentionDs16, heads * t * t * 2,
                                "AttentionBackward (bf16 score gradients, heads x T^2)"));
    ds16 = static_cast<uint16_t*>(copy);
    dS = GemmOperand{ds16, 2};
  }
  for (int64_t b = 0; b < batch; ++b) {
    PT_ASSIGN_OR_RETURN(const Probabilities p,
                        AttentionProbabilities(in, h3, b, t, heads, /*keep_fp32=*/true,
                                               "AttentionBackward (probabilities, heads x T^2)"));
    const int64_t q = b * t * h3, k = q + h, v = q + 2 * h, o = b * t * h;
    float* dq = dqkv->data() + q;
    float* dk = dq + h;
    float* dv = dq + 2 * h;
    // dP = dO V^T, then dS = scale * P * (dP - rowsum(dP * P)) (and its bf16 copy).
    PT_RETURN_IF_ERROR(impl_->GemmEx(false, true, t, t, hd, 1.0f, dO.At(o), type, h, hd,
                                     in.At(v), type, h3, hd, 0.0f, ds, t, t * t, heads));
    PT_CUDA_RETURN_IF_ERROR(
        LaunchCausalSoftmaxBackward(p.fp32, ds, heads * t, t, scale, ds16, impl_->stream));
    const cudaDataType ds_type = TypeOf(dS.element_bytes);
    // dQ = dS K; dK = dS^T Q; dV = P^T dO
    PT_RETURN_IF_ERROR(impl_->GemmEx(false, false, t, hd, t, 1.0f, dS.data, ds_type, t, t * t,
                                     in.At(k), type, h3, hd, 0.0f, dq, h3, hd, heads));
    PT_RETURN_IF_ERROR(impl_->GemmEx(true, false, t, hd, t, 1.0f, dS.data, ds_type, t, t * t,
                                     in.At(q), type, h3, hd, 0.0f, dk, h3, hd, heads));
    PT_RETURN_IF_ERROR(impl_->GemmEx(true, false, t, hd, t, 1.0f, p.operand.data,
                                     TypeOf(p.operand.element_bytes), t, t * t, dO.At(o), type,
                                     h, hd, 0.0f, dv, h3, hd, heads));
  }
  return absl::OkStatus();
}

absl::StatusOr<Backend::CrossEntropyResult> CudaBackend::DoCrossEntropyForward(
    const Tensor& logits, absl::Span<const int32_t> targets, Tensor* probs) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t rows = Rows(logits), v = Cols(logits);
  PT_ASSIGN_OR_RETURN(const int32_t* d_t, StageIds(targets, "CrossEntropyForward (targets)"));
  PT_ASSIGN_OR_RETURN(void* loss_buf,
                      Scratch(kScratchRowLoss, rows * static_cast<int64_t>(sizeof(float)),
                              "CrossEntropyForward (row losses)"));
  PT_ASSIGN_OR_RETURN(void* arg_buf,
                      Scratch(kScratchArgmax, rows * static_cast<int64_t>(sizeof(int32_t)),
                              "CrossEntropyForward (argmax)"));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchCrossEntropyForward(logits.data(), d_t, probs->data(), static_cast<float*>(loss_buf),
                                static_cast<int32_t*>(arg_buf), rows, v, impl_->stream));
  std::vector<float> row_loss(static_cast<size_t>(rows));
  CrossEntropyResult result;
  result.predictions.resize(static_cast<size_t>(rows));
  if (rows > 0) {
    PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(row_loss.data(), loss_buf, rows * sizeof(float),
                                            cudaMemcpyDeviceToHost, impl_->stream));
    PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(result.predictions.data(), arg_buf,
                                            rows * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                            impl_->stream));
    // Host values: wait for this backend's stream only.
    PT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  }
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kIgnoreTarget) continue;
    sum += row_loss[r];
    ++result.valid_targets;
  }
  result.loss = result.valid_targets > 0 ? sum / static_cast<double>(result.valid_targets) : 0.0;
  return result;
}

absl::Status CudaBackend::DoCrossEntropyBackward(const Tensor& probs,
                                                 absl::Span<const int32_t> targets,
                                                 float grad_scale, Tensor* dlogits) {
  PT_CUDA_DEVICE_SCOPE(options_.device);
  const int64_t rows = Rows(probs), v = Cols(probs);
  int64_t valid = 0;
  for (int32_t t : targets) valid += t != kIgnoreTarget ? 1 : 0;
  const float scale = valid > 0 ? grad_scale / static_cast<float>(valid) : 0.0f;
  PT_ASSIGN_OR_RETURN(const int32_t* d_t, StageIds(targets, "CrossEntropyBackward (targets)"));
  PT_CUDA_RETURN_IF_ERROR(LaunchCrossEntropyBackward(probs.data(), d_t, dlogits->data(), rows, v,
                                                     scale, impl_->stream));
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels::cuda
