// CpuBackend: causal multi-head self-attention as per-(batch, head) OpenBLAS GEMMs reading q, k
// and v in place from the packed qkv rows (leading dimension 3H), plus a row-wise masked softmax.
#include <cblas.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels {

absl::Status CpuBackend::DoAttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len,
                                            int64_t heads, Tensor* probs, Tensor* out) {
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t hh = 0; hh < heads; ++hh) {
      const float* q = qkv.data() + b * t * h3 + hh * hd;
      const float* k = q + h;
      const float* v = q + 2 * h;
      float* p = probs->data() + (b * heads + hh) * t * t;
      // scores = scale * q k^T (full square; the mask is applied in the softmax).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hd, scale, q, h3, k, h3, 0.0f, p,
                  t);
      for (int64_t i = 0; i < t; ++i) {
        float* row = p + i * t;
        float mx = row[0];
        for (int64_t j = 1; j <= i; ++j) mx = row[j] > mx ? row[j] : mx;
        float sum = 0.0f;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < t; ++j) row[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, t, 1.0f, p, t, v, h3, 0.0f,
                  out->data() + b * t * h + hh * hd, h);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::DoAttentionBackward(const Tensor& dout, const Tensor& qkv,
                                             const Tensor& probs, int64_t batch, int64_t seq_len,
                                             int64_t heads, Tensor* dqkv) {
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> ds(static_cast<size_t>(t * t));  // scratch, not counted
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t hh = 0; hh < heads; ++hh) {
      const float* q = qkv.data() + b * t * h3 + hh * hd;
      const float* k = q + h;
      const float* v = q + 2 * h;
      const float* p = probs.data() + (b * heads + hh) * t * t;
      const float* dout_bh = dout.data() + b * t * h + hh * hd;
      float* dq = dqkv->data() + b * t * h3 + hh * hd;
      float* dk = dq + h;
      float* dv = dq + 2 * h;
      // dP = dO V^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hd, 1.0f, dout_bh, h, v, h3, 0.0f,
                  ds.data(), t);
      // dS = scale * P * (dP - rowsum(dP * P)); zero above the diagonal.
      for (int64_t i = 0; i < t; ++i) {
        float* row = ds.data() + i * t;
        const float* prow = p + i * t;
        float dot = 0.0f;
        for (int64_t j = 0; j <= i; ++j) dot += row[j] * prow[j];
        for (int64_t j = 0; j <= i; ++j) row[j] = scale * prow[j] * (row[j] - dot);
        for (int64_t j = i + 1; j < t; ++j) row[j] = 0.0f;
      }
      // dQ = dS K, dK = dS^T Q, dV = P^T dO
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, t, 1.0f, ds.data(), t, k, h3,
                  0.0f, dq, h3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, hd, t, 1.0f, ds.data(), t, q, h3,
                  0.0f, dk, h3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, hd, t, 1.0f, p, t, dout_bh, h, 0.0f,
                  dv, h3);
    }
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels
