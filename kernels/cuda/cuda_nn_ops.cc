// CudaBackend: embedding, layernorm, GELU, attention (cuBLAS strided-batched GEMMs over heads +
// our masked softmax kernels) and cross-entropy.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels::cuda {

absl::Status CudaBackend::EmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len,
                                           const Tensor& wte, const Tensor& wpe, Tensor* out) {
  const int64_t n = static_cast<int64_t>(ids.size());
  PT_RETURN_IF_ERROR(CheckDevice("EmbeddingForward", "wte", wte));
  const int64_t h = Cols(wte);
  PT_RETURN_IF_ERROR(CheckMatrix("EmbeddingForward", "wpe", wpe, -1, h));
  PT_RETURN_IF_ERROR(CheckMatrix("EmbeddingForward", "out", *out, n, h));
  if (seq_len <= 0 || n % seq_len != 0 || Rows(wpe) < seq_len) {
    return absl::InvalidArgumentError("EmbeddingForward: bad seq_len");
  }
  PT_RETURN_IF_ERROR(CheckIds("EmbeddingForward", ids, Rows(wte), false));
  PT_ASSIGN_OR_RETURN(const int32_t* d_ids, StageIds(ids));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchEmbeddingForward(d_ids, n, seq_len, wte.data(), wpe.data(), out->data(), h));
  return absl::OkStatus();
}

absl::Status CudaBackend::EmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len,
                                            const Tensor& dout, bool accumulate, Tensor* dwte,
                                            Tensor* dwpe) {
  const int64_t n = static_cast<int64_t>(ids.size());
  PT_RETURN_IF_ERROR(CheckDevice("EmbeddingBackward", "dwte", *dwte));
  const int64_t h = Cols(*dwte);
  PT_RETURN_IF_ERROR(CheckMatrix("EmbeddingBackward", "dwpe", *dwpe, -1, h));
  PT_RETURN_IF_ERROR(CheckMatrix("EmbeddingBackward", "dout", dout, n, h));
  if (seq_len <= 0 || n % seq_len != 0 || Rows(*dwpe) < seq_len) {
    return absl::InvalidArgumentError("EmbeddingBackward: bad seq_len");
  }
  PT_RETURN_IF_ERROR(CheckIds("EmbeddingBackward", ids, Rows(*dwte), false));
  if (!accumulate) {
    PT_RETURN_IF_ERROR(Fill(0.0f, dwte));
    PT_RETURN_IF_ERROR(Fill(0.0f, dwpe));
  }
  PT_ASSIGN_OR_RETURN(const int32_t* d_ids, StageIds(ids));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchEmbeddingBackward(d_ids, n, seq_len, dout.data(), dwte->data(), dwpe->data(), h));
  return absl::OkStatus();
}

absl::Status CudaBackend::LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           Tensor* y, Tensor* mean, Tensor* rstd) {
  PT_RETURN_IF_ERROR(CheckDevice("LayerNormForward", "x", x));
  const int64_t rows = Rows(x), h = Cols(x);
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "gamma", gamma, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "beta", beta, h));
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormForward", "y", *y, rows, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "mean", *mean, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "rstd", *rstd, rows));
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormForward(x.data(), gamma.data(), beta.data(), y->data(),
                                                 mean->data(), rstd->data(), rows, h,
                                                 kLayerNormEps));
  return absl::OkStatus();
}

absl::Status CudaBackend::LayerNormBackwardInput(const Tensor& dy, const Tensor& x,
                                                 const Tensor& gamma, const Tensor& mean,
                                                 const Tensor& rstd, Tensor* dx) {
  PT_RETURN_IF_ERROR(CheckDevice("LayerNormBackwardInput", "x", x));
  const int64_t rows = Rows(x), h = Cols(x);
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormBackwardInput", "dy", dy, rows, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardInput", "gamma", gamma, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardInput", "mean", mean, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardInput", "rstd", rstd, rows));
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormBackwardInput", "dx", *dx, rows, h));
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormBackwardInput(
      dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx->data(), rows, h));
  return absl::OkStatus();
}

absl::Status CudaBackend::LayerNormBackwardWeight(const Tensor& dy, const Tensor& x,
                                                  const Tensor& mean, const Tensor& rstd,
                                                  bool accumulate, Tensor* dgamma, Tensor* dbeta) {
  PT_RETURN_IF_ERROR(CheckDevice("LayerNormBackwardWeight", "x", x));
  const int64_t rows = Rows(x), h = Cols(x);
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormBackwardWeight", "dy", dy, rows, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "mean", mean, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "rstd", rstd, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "dgamma", *dgamma, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "dbeta", *dbeta, h));
  PT_CUDA_RETURN_IF_ERROR(LaunchLayerNormBackwardWeight(dy.data(), x.data(), mean.data(),
                                                        rstd.data(), dgamma->data(), dbeta->data(),
                                                        rows, h, accumulate));
  return absl::OkStatus();
}

absl::Status CudaBackend::GeluForward(const Tensor& x, Tensor* y) {
  PT_RETURN_IF_ERROR(CheckDevice("GeluForward", "x", x));
  PT_RETURN_IF_ERROR(CheckNumel("GeluForward", "y", *y, x.numel()));
  PT_CUDA_RETURN_IF_ERROR(LaunchGeluForward(x.data(), y->data(), x.numel()));
  return absl::OkStatus();
}

absl::Status CudaBackend::GeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) {
  PT_RETURN_IF_ERROR(CheckDevice("GeluBackward", "x", x));
  PT_RETURN_IF_ERROR(CheckNumel("GeluBackward", "dy", dy, x.numel()));
  PT_RETURN_IF_ERROR(CheckNumel("GeluBackward", "dx", *dx, x.numel()));
  PT_CUDA_RETURN_IF_ERROR(LaunchGeluBackward(dy.data(), x.data(), dx->data(), x.numel()));
  return absl::OkStatus();
}

namespace {
absl::Status CheckAttention(absl::string_view op, const Tensor& qkv, int64_t batch, int64_t t,
                            int64_t heads, const Tensor& probs) {
  PT_RETURN_IF_ERROR(CheckDevice(op, "qkv", qkv));
  if (batch <= 0 || t <= 0 || heads <= 0 || Cols(qkv) % (3 * heads) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": bad batch/seq_len/heads"));
  }
  PT_RETURN_IF_ERROR(CheckMatrix(op, "qkv", qkv, batch * t, -1));
  return CheckNumel(op, "probs", probs, batch * heads * t * t);
}
}  // namespace

absl::Status CudaBackend::AttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len,
                                           int64_t heads, Tensor* probs, Tensor* out) {
  PT_RETURN_IF_ERROR(CheckAttention("AttentionForward", qkv, batch, seq_len, heads, *probs));
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  PT_RETURN_IF_ERROR(CheckMatrix("AttentionForward", "out", *out, batch * t, h));
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

absl::Status CudaBackend::AttentionBackward(const Tensor& dout, const Tensor& qkv,
                                            const Tensor& probs, int64_t batch, int64_t seq_len,
                                            int64_t heads, Tensor* dqkv) {
  PT_RETURN_IF_ERROR(CheckAttention("AttentionBackward", qkv, batch, seq_len, heads, probs));
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  PT_RETURN_IF_ERROR(CheckMatrix("AttentionBackward", "dout", dout, batch * t, h));
  PT_RETURN_IF_ERROR(CheckMatrix("AttentionBackward", "dqkv", *dqkv, batch * t, h3));
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

absl::StatusOr<Backend::CrossEntropyResult> CudaBackend::CrossEntropyForward(
    const Tensor& logits, absl::Span<const int32_t> targets, Tensor* probs) {
  PT_RETURN_IF_ERROR(CheckDevice("CrossEntropyForward", "logits", logits));
  const int64_t rows = Rows(logits), v = Cols(logits);
  if (static_cast<int64_t>(targets.size()) != rows) {
    return absl::InvalidArgumentError("CrossEntropyForward: targets/rows mismatch");
  }
  PT_RETURN_IF_ERROR(CheckMatrix("CrossEntropyForward", "probs", *probs, rows, v));
  PT_RETURN_IF_ERROR(CheckIds("CrossEntropyForward", targets, v, true));
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

absl::Status CudaBackend::CrossEntropyBackward(const Tensor& probs,
                                               absl::Span<const int32_t> targets, float grad_scale,
                                               Tensor* dlogits) {
  PT_RETURN_IF_ERROR(CheckDevice("CrossEntropyBackward", "probs", probs));
  const int64_t rows = Rows(probs), v = Cols(probs);
  if (static_cast<int64_t>(targets.size()) != rows) {
    return absl::InvalidArgumentError("CrossEntropyBackward: targets/rows mismatch");
  }
  PT_RETURN_IF_ERROR(CheckMatrix("CrossEntropyBackward", "dlogits", *dlogits, rows, v));
  PT_RETURN_IF_ERROR(CheckIds("CrossEntropyBackward", targets, v, true));
  int64_t valid = 0;
  for (int32_t t : targets) valid += t != kIgnoreTarget ? 1 : 0;
  const float scale = valid > 0 ? grad_scale / static_cast<float>(valid) : 0.0f;
  PT_ASSIGN_OR_RETURN(const int32_t* d_t, StageIds(targets));
  PT_CUDA_RETURN_IF_ERROR(
      LaunchCrossEntropyBackward(probs.data(), d_t, dlogits->data(), rows, v, scale));
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels::cuda
