// CudaBackend: embedding, layernorm, GELU, attention (cuBLAS strided-batched GEMMs over heads +
// our masked softmax kernels) and cross-entropy.
#include <cmath>
#include <vector>

#include "common/status_macros.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels::cuda {

absl::Status CudaBackend::DoEmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len,
                                             const Tensor& wte, const Tensor& wpe, Tensor* out) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t h = Cols(wte);
  PT_ASSIGN_OR_RETURN(const int32_t* d_ids, StageIds(ids));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchEmbeddingForward(d_ids, n, seq_len, wte.data(), wpe.data(), out->data(), h));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoEmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len,
                                              const Tensor& dout, bool accumulate, Tensor* dwte,
                                              Tensor* dwpe) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t h = Cols(*dwte);
  if (!accumulate) {
    PT_RETURN_IF_ERROR(Fill(0.0f, dwte));
    PT_RETURN_IF_ERROR(Fill(0.0f, dwpe));
  }
  PT_ASSIGN_OR_RETURN(const int32_t* d_ids, StageIds(ids));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchEmbeddingBackward(d_ids, n, seq_len, dout.data(), dwte->data(), dwpe->data(), h));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoLayerNormForward(const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, Tensor* y, Tensor* mean,
                                             Tensor* rstd) {
  const int64_t rows = Rows(x), h = Cols(x);
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormForward(x.data(), gamma.data(), beta.data(), y->data(),
                                                 mean->data(), rstd->data(), rows, h,
                                                 kLayerNormEps));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoLayerNormBackwardInput(const Tensor& dy, const Tensor& x,
                                                   const Tensor& gamma, const Tensor& mean,
                                                   const Tensor& rstd, Tensor* dx) {
  const int64_t rows = Rows(x), h = Cols(x);
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormBackwardInput(
      dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx->data(), rows, h));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoLayerNormBackwardWeight(const Tensor& dy, const Tensor& x,
                                                    const Tensor& mean, const Tensor& rstd,
                                                    bool accumulate, Tensor* dgamma,
                                                    Tensor* dbeta) {
  const int64_t rows = Rows(x), h = Cols(x);
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormBackwardWeight(dy.data(), x.data(), mean.data(),
                                                        rstd.data(), dgamma->data(), dbeta->data(),
                                                        rows, h, accumulate));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoGeluForward(const Tensor& x, Tensor* y) {
  PT_CUDA_RETURN_IF_ERROR(LaunchGeluForward(x.data(), y->data(), x.numel()));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoGeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) {
  PT_CUDA_RETURN_IF_ERROR(LaunchGeluBackward(dy.data(), x.data(), dx->data(), x.numel()));
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len,
                                             int64_t heads, Tensor* probs, Tensor* out) {
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t b = 0; b < batch; ++b) {
    const float* q = qkv.data() + b * t * h3;
    float* p = probs->data() + b * heads * t * t;
    // S_h = scale * Q_h K_h^T for all heads h (stride hd between heads inside a row).
    PT_RETURN_IF_ERROR(impl_->Gemm(false, true, t, t, hd, scale, q, h3, hd, q + h, h3, hd, 0.0f, p,
                                   t, t * t, heads));
  }
  PT_CUDA_RETURN_IF_ERROR(LaunchCausalSoftmax(probs->data(), batch * heads * t, t));
  for (int64_t b = 0; b < batch; ++b) {
    const float* v = qkv.data() + b * t * h3 + 2 * h;
    PT_RETURN_IF_ERROR(impl_->Gemm(false, false, t, hd, t, 1.0f, probs->data() + b * heads * t * t,
                                   t, t * t, v, h3, hd, 0.0f, out->data() + b * t * h, h, hd,
                                   heads));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::DoAttentionBackward(const Tensor& dout, const Tensor& qkv,
                                              const Tensor& probs, int64_t batch, int64_t seq_len,
                                              int64_t heads, Tensor* dqkv) {
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  PT_ASSIGN_OR_RETURN(void* scratch, Scratch(3, heads * t * t * sizeof(float)));
  float* ds = static_cast<float*>(scratch);
  for (int64_t b = 0; b < batch; ++b) {
    const float* q = qkv.data() + b * t * h3;
    const float* k = q + h;
    const float* v = q + 2 * h;
    const float* p = probs.data() + b * heads * t * t;
    const float* dob = dout.data() + b * t * h;
    float* dq = dqkv->data() + b * t * h3;
    float* dk = dq + h;
    float* dv = dq + 2 * h;
    // dP = dO V^T
    PT_RETURN_IF_ERROR(
        impl_->Gemm(false, true, t, t, hd, 1.0f, dob, h, hd, v, h3, hd, 0.0f, ds, t, t * t, heads));
    PT_CUDA_RETURN_IF_ERROR(LaunchCausalSoftmaxBackward(p, ds, heads * t, t, scale));
    // dQ = dS K; dK = dS^T Q; dV = P^T dO
    PT_RETURN_IF_ERROR(impl_->Gemm(false, false, t, hd, t, 1.0f, ds, t, t * t, k, h3, hd, 0.0f, dq,
                                   h3, hd, heads));
    PT_RETURN_IF_ERROR(
        impl_->Gemm(true, false, t, hd, t, 1.0f, ds, t, t * t, q, h3, hd, 0.0f, dk, h3, hd, heads));
    PT_RETURN_IF_ERROR(
        impl_->Gemm(true, false, t, hd, t, 1.0f, p, t, t * t, dob, h, hd, 0.0f, dv, h3, hd, heads));
  }
  return absl::OkStatus();
}

absl::StatusOr<Backend::CrossEntropyResult> CudaBackend::DoCrossEntropyForward(
    const Tensor& logits, absl::Span<const int32_t> targets, Tensor* probs) {
  const int64_t rows = Rows(logits), v = Cols(logits);
  PT_ASSIGN_OR_RETURN(const int32_t* d_t, StageIds(targets));
  PT_ASSIGN_OR_RETURN(void* loss_buf, Scratch(1, std::max<int64_t>(rows, 1) * sizeof(float)));
  PT_ASSIGN_OR_RETURN(void* arg_buf, Scratch(2, std::max<int64_t>(rows, 1) * sizeof(int32_t)));
  PT_CUDA_RETURN_IF_ERROR(LaunchCrossEntropyForward(logits.data(), d_t, probs->data(),
                                                    static_cast<float*>(loss_buf),
                                                    static_cast<int32_t*>(arg_buf), rows, v));
  std::vector<float> row_loss(static_cast<size_t>(rows));
  CrossEntropyResult result;
  result.predictions.resize(static_cast<size_t>(rows));
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(row_loss.data(), loss_buf, rows * sizeof(float), cudaMemcpyDeviceToHost));
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpy(result.predictions.data(), arg_buf, rows * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost));
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
  const int64_t rows = Rows(probs), v = Cols(probs);
  int64_t valid = 0;
  for (int32_t t : targets) valid += t != kIgnoreTarget ? 1 : 0;
  const float scale = valid > 0 ? grad_scale / static_cast<float>(valid) : 0.0f;
  PT_ASSIGN_OR_RETURN(const int32_t* d_t, StageIds(targets));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchCrossEntropyBackward(probs.data(), d_t, dlogits->data(), rows, v, scale));
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels::cuda
