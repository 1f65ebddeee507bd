// CpuBackend: causal multi-head self-attention, per (batch, head), in blocks of kQueryBlock query
// rows: OpenBLAS GEMMs read q, k and v in place from the packed qkv rows (leading dimension 3H)
// and touch only the key columns a block can see (the causal lower triangle, rounded up to whole
// blocks: at T = 128 and 32-row blocks, 62.5% of the full T x T products); the row-wise softmax
// and its backward run through the VectorKernels table. Block boundaries depend on T only, so
// results do not depend on batch or head count.
//
// The probabilities P are never kept: the forward writes one block of rows at a time into a
// scratch that stays in cache, and the backward recomputes P with the very same calls (same GEMM
// shapes, same vector kernels), so it gets the forward's P bit for bit. A block's stash is then
// qkv alone: the T x T probabilities per head, the largest activation at long sequences, cost
// one extra scores GEMM and softmax in the backward instead of memory between passes.
//
// With bf16_gemm every product reads bf16-rounded inputs, as the CUDA backend's tensor-core
// products do: q, k, v and the output gradient are rounded once per call, and P and dS where a
// product reads them (the softmax and its backward stay fp32).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/status_macros.h"
#include "kernels/bf16.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm_router.h"
#include "kernels/scratch_buffer.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels {
namespace {

constexpr int64_t kQueryBlock = 32;

// P's rows [i0, i1) for one head, into p (row i at p + (i - i0) * t): the softmax of
// scale * q k^T over keys [0, i], zeros at keys (i, i1). Columns >= i1 are not written.
void CausalProbabilities(const GemmRouter& gemm, const VectorKernels& vk, const float* q, const float* k, int64_t h3,
                         int64_t hd, int64_t t, float scale, int64_t i0, int64_t i1, float* p) {
  gemm.Run(false, true, i1 - i0, i1, hd, scale, q + i0 * h3, h3, k,
              h3, 0.0f, p, t);
  for (int64_t i = i0; i < i1; ++i) {
    float* row = p + (i - i0) * t;
    const int64_t n = i + 1;  // keys 0..i are visible
    const float sum = vk.exp_shift_sum(row, vk.row_max(row, n), n, row);
    vk.scale(1.0f / sum, n, row);
    std::fill(row + n, row + i1, 0.0f);
  }
}

// Rounds rows x cols values (row stride ld) to bf16 in place.
void RoundRowsToBf16(float* p, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) p[r * ld + c] = RoundToBf16(p[r * ld + c]);
  }
}

}  // namespace

absl::Status CpuBackend::DoAttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len,
                                            int64_t heads, Tensor* out) {
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> p(static_cast<size_t>(std::min(t, kQueryBlock) * t));  // one block of P
  ScratchBuffer qkv16;
  PT_ASSIGN_OR_RETURN(
      const float* in,
      ProductInput(qkv, "AttentionForward (bf16 copy of qkv)", &qkv16));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t hh = 0; hh < heads; ++hh) {
      const float* q = in + b * t * h3 + hh * hd;
      const float* k = q + h;
      const float* v = q + 2 * h;
      float* o = out->data() + b * t * h + hh * hd;
      for (int64_t i0 = 0; i0 < t; i0 += kQueryBlock) {
        const int64_t i1 = std::min(t, i0 + kQueryBlock), rows = i1 - i0;
        CausalProbabilities(gemm_, *vk_, q, k, h3, hd, t, scale, i0, i1, p.data());
        if (bf16_gemm_) RoundRowsToBf16(p.data(), rows, i1, t);
        gemm_.Run(false, false, rows, hd, i1, 1.0f, p.data(), t, v,
                    h3, 0.0f, o + i0 * h, h);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::DoAttentionBackward(const Tensor& dout, const Tensor& qkv, int64_t batch,
                                             int64_t seq_len, int64_t heads, Tensor* dqkv) {
  const int64_t h3 = Cols(qkv), h = h3 / 3, hd = h / heads, t = seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // P (recomputed) and dS scratch for one head (not counted: transient, T x T each). Only the
  // blocks of the lower triangle are written, and only those are read: a key block [j0, j1) is
  // read from rows >= j0, whose query blocks end at >= j1.
  std::vector<float> p(static_cast<size_t>(t * t)), ds(static_cast<size_t>(t * t));
  ScratchBuffer qkv16, dout16;
  PT_ASSIGN_OR_RETURN(
      const float* in,
      ProductInput(qkv, "AttentionBackward (bf16 copy of qkv)", &qkv16));
  PT_ASSIGN_OR_RETURN(const float* d_in,
                      ProductInput(dout,
                                   "AttentionBackward (bf16 copy of the gradient)", &dout16));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t hh = 0; hh < heads; ++hh) {
      const float* q = in + b * t * h3 + hh * hd;
      const float* k = q + h;
      const float* v = q + 2 * h;
      const float* dout_bh = d_in + b * t * h + hh * hd;
      float* dq = dqkv->data() + b * t * h3 + hh * hd;
      float* dk = dq + h;
      float* dv = dq + 2 * h;
      for (int64_t i0 = 0; i0 < t; i0 += kQueryBlock) {
        const int64_t i1 = std::min(t, i0 + kQueryBlock), rows = i1 - i0;
        CausalProbabilities(gemm_, *vk_, q, k, h3, hd, t, scale, i0, i1, p.data() + i0 * t);
        float* ds_blk = ds.data() + i0 * t;
        // dP = dO V^T, then dS = scale * P * (dP - rowsum(dP * P)), zero above the diagonal.
        gemm_.Run(false, true, rows, i1, hd, 1.0f,
                    dout_bh + i0 * h, h, v, h3, 0.0f, ds_blk, t);
        for (int64_t i = i0; i < i1; ++i) {
          float* row = ds.data() + i * t;
          const float* prow = p.data() + i * t;
          const int64_t n = i + 1;
          vk_->softmax_backward_row(prow, vk_->dot(row, prow, n), scale, n, row);
          std::fill(row + n, row + i1, 0.0f);
        }
        if (bf16_gemm_) {  // the products below read dS and P (dV = P^T dO) in bf16
          RoundRowsToBf16(ds_blk, rows, i1, t);
          RoundRowsToBf16(p.data() + i0 * t, rows, i1, t);
        }
        // dQ = dS K over the visible keys.
        gemm_.Run(false, false, rows, hd, i1, 1.0f, ds_blk, t, k,
                    h3, 0.0f, dq + i0 * h3, h3);
      }
      for (int64_t j0 = 0; j0 < t; j0 += kQueryBlock) {
        const int64_t j1 = std::min(t, j0 + kQueryBlock), cols = j1 - j0;
        // dK = dS^T Q and dV = P^T dO over the queries that see keys [j0, j1): rows >= j0.
        gemm_.Run(true, false, cols, hd, t - j0, 1.0f,
                    ds.data() + j0 * t + j0, t, q + j0 * h3, h3, 0.0f, dk + j0 * h3, h3);
        gemm_.Run(true, false, cols, hd, t - j0, 1.0f,
                    p.data() + j0 * t + j0, t, dout_bh + j0 * h, h, 0.0f, dv + j0 * h3, h3);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels
