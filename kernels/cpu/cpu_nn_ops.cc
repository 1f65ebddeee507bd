// CpuBackend: embedding, layernorm, GELU and cross-entropy (the inner loops in vector_kernels).
#include <cmath>
#include <limits>

#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels {
absl::Status CpuBackend::DoEmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len,
                                            const Tensor& wte, const Tensor& wpe, Tensor* out) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t h = Cols(wte);
  for (int64_t i = 0; i < n; ++i) {
    const float* te = wte.data() + static_cast<int64_t>(ids[i]) * h;
    const float* pe = wpe.data() + (i % seq_len) * h;
    float* o = out->data() + i * h;
    for (int64_t j = 0; j < h; ++j) o[j] = te[j] + pe[j];
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::DoEmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len,
                                             const Tensor& dout, bool accumulate, Tensor* dwte,
                                             Tensor* dwpe) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t h = Cols(*dwte);
  if (!accumulate) {
    PT_RETURN_IF_ERROR(Fill(0.0f, dwte));
    PT_RETURN_IF_ERROR(Fill(0.0f, dwpe));
  }
  for (int64_t i = 0; i < n; ++i) {
    const float* d = dout.data() + i * h;
    float* te = dwte->data() + static_cast<int64_t>(ids[i]) * h;
    float* pe = dwpe->data() + (i % seq_len) * h;
    for (int64_t j = 0; j < h; ++j) {
      te[j] += d[j];
      pe[j] += d[j];
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::DoLayerNormForward(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, Tensor* y, Tensor* mean,
                                            Tensor* rstd) {
  vk_->layer_norm_forward(x.data(), gamma.data(), beta.data(), Rows(x), Cols(x), kLayerNormEps,
                          y->data(), mean->data(), rstd->data());
  return absl::OkStatus();
}

absl::Status CpuBackend::DoLayerNormBackwardInput(const Tensor& dy, const Tensor& x,
                                                  const Tensor& gamma, const Tensor& mean,
                                                  const Tensor& rstd, const Tensor* residual,
                                                  Tensor* dx) {
  vk_->layer_norm_backward_input(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(),
                                 residual == nullptr ? nullptr : residual->data(), Rows(x),
                                 Cols(x), dx->data());
  return absl::OkStatus();
}

absl::Status CpuBackend::DoLayerNormBackwardWeight(const Tensor& dy, const Tensor& x,
                                                   const Tensor& mean, const Tensor& rstd,
                                                   bool accumulate, Tensor* dgamma, Tensor* dbeta) {
  const int64_t rows = Rows(x), h = Cols(x);
  float* dg = dgamma->data();
  float* db = dbeta->data();
  if (!accumulate) {
    for (int64_t j = 0; j < h; ++j) dg[j] = db[j] = 0.0f;
  }
  vk_->layer_norm_backward_weight(dy.data(), x.data(), mean.data(), rstd.data(), rows, h, dg, db);
  return absl::OkStatus();
}

absl::Status CpuBackend::DoGeluForward(const Tensor& x, Tensor* y) {
  vk_->gelu_forward(x.data(), x.numel(), y->data());
  return absl::OkStatus();
}

absl::Status CpuBackend::DoGeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) {
  vk_->gelu_backward(dy.data(), x.data(), x.numel(), dx->data());
  return absl::OkStatus();
}

absl::StatusOr<Backend::CrossEntropyResult> CpuBackend::DoCrossEntropyForward(
    const Tensor& logits, absl::Span<const int32_t> targets, Tensor* probs) {
  const int64_t rows = Rows(logits), v = Cols(logits);
  CrossEntropyResult result;
  result.predictions.resize(static_cast<size_t>(rows));
  double loss_sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits.data() + r * v;
    float* pr = probs->data() + r * v;
    // The row's maximum through the vector table and its first position by a scan that stops
    // there. Without NaN that is exactly the scalar loop's (mx, arg); with a NaN or +inf the sum
    // is NaN and the probabilities and loss are NaN whatever mx was, so only the prediction is
    // redone the scalar way (the first largest non-NaN logit, 0 if there is none).
    const float mx = vk_->row_max(lr, v);
    int32_t arg = 0;
    while (arg < v && !(lr[arg] == mx)) ++arg;
    const float sum = vk_->exp_shift_sum(lr, mx, v, pr);
    if (arg == v || std::isnan(sum)) {
      float best = -std::numeric_limits<float>::infinity();
      arg = 0;
      for (int64_t j = 0; j < v; ++j) {
        if (lr[j] > best) {
          best = lr[j];
          arg = static_cast<int32_t>(j);
        }
      }
    }
    vk_->scale(1.0f / sum, v, pr);
    result.predictions[r] = arg;
    if (targets[r] != kIgnoreTarget) {
      loss_sum += static_cast<double>(std::log(sum) + mx - lr[targets[r]]);
      ++result.valid_targets;
    }
  }
  result.loss =
      result.valid_targets > 0 ? loss_sum / static_cast<double>(result.valid_targets) : 0.0;
  return result;
}

absl::Status CpuBackend::DoCrossEntropyBackward(const Tensor& probs,
                                                absl::Span<const int32_t> targets, float grad_scale,
                                                Tensor* dlogits) {
  const int64_t rows = Rows(probs), v = Cols(probs);
  int64_t valid = 0;
  for (int32_t t : targets) valid += t != kIgnoreTarget ? 1 : 0;
  const float scale = valid > 0 ? grad_scale / static_cast<float>(valid) : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = probs.data() + r * v;
    float* dr = dlogits->data() + r * v;
    if (targets[r] == kIgnoreTarget) {
      for (int64_t j = 0; j < v; ++j) dr[j] = 0.0f;
      continue;
    }
    for (int64_t j = 0; j < v; ++j) dr[j] = pr[j] * scale;
    dr[targets[r]] -= scale;
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels
