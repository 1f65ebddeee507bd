#include "kernels/backend.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/bf16.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels {

absl::StatusOr<Tensor> Backend::Empty(const Shape& shape, absl::string_view what) {
  return device_allocator().Allocate(shape, what);
}

absl::StatusOr<Tensor> Backend::Zeros(const Shape& shape, absl::string_view what) {
  PT_ASSIGN_OR_RETURN(Tensor t, device_allocator().Allocate(shape, what));
  PT_RETURN_IF_ERROR(Fill(0.0f, &t));
  return t;
}

absl::StatusOr<Tensor> Backend::FromHost(const Shape& shape, absl::Span<const float> values,
                                         absl::string_view what) {
  if (static_cast<int64_t>(values.size()) != NumElements(shape)) {
    return absl::InvalidArgumentError(absl::StrCat("FromHost(", what, "): ", values.size(),
                                                   " values for shape ", ShapeString(shape)));
  }
  PT_ASSIGN_OR_RETURN(Tensor t, device_allocator().Allocate(shape, what));
  PT_RETURN_IF_ERROR(Upload(values, &t));
  return t;
}

absl::StatusOr<std::vector<float>> Backend::ToVector(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.location() == Location::kHost) {
    const auto* bf16 = static_cast<const uint16_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) {
      out[i] = t.dtype() == DType::kF32 ? t.data()[i] : Bf16BitsToFloat(bf16[i]);
    }
    return out;
  }
  if (t.dtype() == DType::kBF16) {
    PT_ASSIGN_OR_RETURN(Tensor wide, ToF32(t, "ToVector"));
    PT_RETURN_IF_ERROR(Download(wide, absl::MakeSpan(out)));
    return out;
  }
  PT_RETURN_IF_ERROR(Download(t, absl::MakeSpan(out)));
  return out;
}

// ---- Transfers ----

absl::Status Backend::Upload(absl::Span<const float> src, Tensor* dst) {
  PT_RETURN_IF_ERROR(CheckNumel("Upload", "dst", *dst, static_cast<int64_t>(src.size())));
  return DoUpload(src, dst);
}

absl::Status Backend::Download(const Tensor& src, absl::Span<float> dst) {
  PT_RETURN_IF_ERROR(CheckNumel("Download", "src", src, static_cast<int64_t>(dst.size())));
  return DoDownload(src, dst);
}

absl::StatusOr<Tensor> Backend::CopyToHost(const Tensor& src, absl::string_view what) {
  // Any dtype: offload moves bf16 stashes too.
  if (src.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("CopyToHost: ", what, " is empty"));
  }
  if (src.location() != Location::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat("CopyToHost: ", what, " is a host tensor"));
  }
  return DoCopyToHost(src, what);
}

absl::StatusOr<Tensor> Backend::CopyToDevice(const Tensor& src, absl::string_view what) {
  if (src.empty() || src.location() != Location::kHost) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyToDevice: ", what, " is not a host tensor"));
  }
  return DoCopyToDevice(src, what);
}

absl::Status Backend::Copy(const Tensor& src, Tensor* dst) {
  PT_RETURN_IF_ERROR(CheckDevice("Copy", "src", src));
  PT_RETURN_IF_ERROR(CheckNumel("Copy", "dst", *dst, src.numel()));
  return DoCopy(src, dst);
}

absl::StatusOr<Tensor> Backend::ToBf16(const Tensor& src, absl::string_view what) {
  PT_RETURN_IF_ERROR(CheckDevice("ToBf16", what, src));
  PT_ASSIGN_OR_RETURN(Tensor dst, device_allocator().Allocate(src.shape(), what, DType::kBF16));
  if (src.numel() > 0) PT_RETURN_IF_ERROR(DoConvert(src, &dst));
  return dst;
}

absl::StatusOr<Tensor> Backend::ToF32(const Tensor& src, absl::string_view what) {
  if (src.empty() || src.location() != Location::kDevice || src.dtype() != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("ToF32: ", what, " is not a bf16 device tensor: ", src.DebugString()));
  }
  PT_ASSIGN_OR_RETURN(Tensor dst, device_allocator().Allocate(src.shape(), what));
  if (src.numel() > 0) PT_RETURN_IF_ERROR(DoConvert(src, &dst));
  return dst;
}

// ---- Elementwise ----

absl::Status Backend::Fill(float value, Tensor* t) {
  PT_RETURN_IF_ERROR(CheckDevice("Fill", "t", *t));
  return DoFill(value, t);
}

absl::Status Backend::AddInPlace(const Tensor& x, Tensor* y) {
  PT_RETURN_IF_ERROR(CheckDevice("AddInPlace", "x", x));
  PT_RETURN_IF_ERROR(CheckNumel("AddInPlace", "y", *y, x.numel()));
  return DoAddInPlace(x, y);
}

absl::Status Backend::Add(const Tensor& a, const Tensor& b, Tensor* out) {
  PT_RETURN_IF_ERROR(CheckDevice("Add", "a", a));
  PT_RETURN_IF_ERROR(CheckNumel("Add", "b", b, a.numel()));
  PT_RETURN_IF_ERROR(CheckNumel("Add", "out", *out, a.numel()));
  return DoAdd(a, b, out);
}

// ---- GEMM ----

absl::Status Backend::Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                           float alpha, float beta, Tensor* c) {
  PT_RETURN_IF_ERROR(CheckDevice("Gemm", "a", a));
  PT_RETURN_IF_ERROR(CheckDevice("Gemm", "b", b));
  const int64_t m = trans_a ? Cols(a) : Rows(a);
  const int64_t k = trans_a ? Rows(a) : Cols(a);
  const int64_t kb = trans_b ? Cols(b) : Rows(b);
  const int64_t n = trans_b ? Rows(b) : Cols(b);
  if (k != kb) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: inner dimensions differ: a ", ShapeString(a.shape()),
                     trans_a ? "^T" : "", " x b ", ShapeString(b.shape()), trans_b ? "^T" : ""));
  }
  PT_RETURN_IF_ERROR(CheckMatrix("Gemm", "c", *c, m, n));
  if (m == 0 || n == 0) return absl::OkStatus();
  return DoGemm(a, trans_a, b, trans_b, alpha, beta, c);
}

absl::Status Backend::AddBias(const Tensor& bias, Tensor* y) {
  PT_RETURN_IF_ERROR(CheckDevice("AddBias", "y", *y));
  PT_RETURN_IF_ERROR(CheckNumel("AddBias", "bias", bias, Cols(*y)));
  return DoAddBias(bias, y);
}

absl::Status Backend::BiasRows(const Tensor& bias, const Tensor* residual, Tensor* out) {
  PT_RETURN_IF_ERROR(CheckDevice("BiasRows", "out", *out));
  PT_RETURN_IF_ERROR(CheckNumel("BiasRows", "bias", bias, Cols(*out)));
  if (residual != nullptr) {
    PT_RETURN_IF_ERROR(CheckDevice("BiasRows", "residual", *residual));
    PT_RETURN_IF_ERROR(CheckNumel("BiasRows", "residual", *residual, out->numel()));
  }
  return DoBiasRows(bias, residual, out);
}

absl::Status Backend::DoBiasRows(const Tensor& bias, const Tensor* residual, Tensor* out) {
  if (residual != nullptr) {
    PT_RETURN_IF_ERROR(DoCopy(*residual, out));
  } else {
    PT_RETURN_IF_ERROR(DoFill(0.0f, out));
  }
  return DoAddBias(bias, out);  // residual + bias, as a fused pass rounds it
}

absl::Status Backend::Linear(const Tensor& x, const Tensor& w, const Tensor& bias,
                             const Tensor* residual, Tensor* out) {
  PT_RETURN_IF_ERROR(BiasRows(bias, residual, out));
  return Gemm(x, false, w, false, 1.0f, 1.0f, out);
}

absl::Status Backend::BiasGrad(const Tensor& dy, bool accumulate, Tensor* db) {
  PT_RETURN_IF_ERROR(CheckDevice("BiasGrad", "dy", dy));
  PT_RETURN_IF_ERROR(CheckNumel("BiasGrad", "db", *db, Cols(dy)));
  return DoBiasGrad(dy, accumulate, db);
}

// ---- Embedding ----

namespace {

// The checks both embedding passes share: `table` [V,H] and `positions` [>=seq_len,H] on the
// device, `rows` [ids.size(),H], seq_len dividing the token count, ids in [0,V).
absl::Status CheckEmbeddingArgs(absl::string_view op, absl::Span<const int32_t> ids,
                                int64_t seq_len, const char* table_name, const Tensor& table,
                                const char* positions_name, const Tensor& positions,
                                const char* rows_name, const Tensor& rows) {
  const int64_t n = static_cast<int64_t>(ids.size());
  PT_RETURN_IF_ERROR(CheckDevice(op, table_name, table));
  const int64_t h = Cols(table);
  PT_RETURN_IF_ERROR(CheckMatrix(op, positions_name, positions, -1, h));
  PT_RETURN_IF_ERROR(CheckMatrix(op, rows_name, rows, n, h));
  if (seq_len <= 0 || n % seq_len != 0 || Rows(positions) < seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": bad seq_len ", seq_len, " for ", n,
                                                   " ids and ", Rows(positions), " positions"));
  }
  return CheckIds(op, ids, Rows(table), false);
}

}  // namespace

absl::Status Backend::EmbeddingForward(absl::Span<const int32_t> ids, int64_t seq_len,
                                       const Tensor& wte, const Tensor& wpe, Tensor* out) {
  PT_RETURN_IF_ERROR(
      CheckEmbeddingArgs("EmbeddingForward", ids, seq_len, "wte", wte, "wpe", wpe, "out", *out));
  return DoEmbeddingForward(ids, seq_len, wte, wpe, out);
}

absl::Status Backend::EmbeddingBackward(absl::Span<const int32_t> ids, int64_t seq_len,
                                        const Tensor& dout, bool accumulate, Tensor* dwte,
                                        Tensor* dwpe) {
  PT_RETURN_IF_ERROR(CheckEmbeddingArgs("EmbeddingBackward", ids, seq_len, "dwte", *dwte, "dwpe",
                                        *dwpe, "dout", dout));
  return DoEmbeddingBackward(ids, seq_len, dout, accumulate, dwte, dwpe);
}

// ---- LayerNorm ----

absl::Status Backend::LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       Tensor* y, Tensor* mean, Tensor* rstd) {
  PT_RETURN_IF_ERROR(CheckDevice("LayerNormForward", "x", x));
  const int64_t rows = Rows(x), h = Cols(x);
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "gamma", gamma, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "beta", beta, h));
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormForward", "y", *y, rows, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "mean", *mean, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormForward", "rstd", *rstd, rows));
  return DoLayerNormForward(x, gamma, beta, y, mean, rstd);
}

absl::Status Backend::LayerNormBackwardInput(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                             const Tensor& mean, const Tensor& rstd, Tensor* dx,
                                             const Tensor* residual) {
  PT_RETURN_IF_ERROR(CheckDevice("LayerNormBackwardInput", "x", x));
  const int64_t rows = Rows(x), h = Cols(x);
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormBackwardInput", "dy", dy, rows, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardInput", "gamma", gamma, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardInput", "mean", mean, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardInput", "rstd", rstd, rows));
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormBackwardInput", "dx", *dx, rows, h));
  if (residual != nullptr) {
    PT_RETURN_IF_ERROR(CheckDevice("LayerNormBackwardInput", "residual", *residual));
    PT_RETURN_IF_ERROR(CheckMatrix("LayerNormBackwardInput", "residual", *residual, rows, h));
  }
  return DoLayerNormBackwardInput(dy, x, gamma, mean, rstd, residual, dx);
}

absl::Status Backend::LayerNormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                              const Tensor& rstd, bool accumulate, Tensor* dgamma,
                                              Tensor* dbeta) {
  PT_RETURN_IF_ERROR(CheckDevice("LayerNormBackwardWeight", "x", x));
  const int64_t rows = Rows(x), h = Cols(x);
  PT_RETURN_IF_ERROR(CheckMatrix("LayerNormBackwardWeight", "dy", dy, rows, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "mean", mean, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "rstd", rstd, rows));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "dgamma", *dgamma, h));
  PT_RETURN_IF_ERROR(CheckNumel("LayerNormBackwardWeight", "dbeta", *dbeta, h));
  return DoLayerNormBackwardWeight(dy, x, mean, rstd, accumulate, dgamma, dbeta);
}

// ---- GELU ----

absl::Status Backend::GeluForward(const Tensor& x, Tensor* y) {
  PT_RETURN_IF_ERROR(CheckDevice("GeluForward", "x", x));
  PT_RETURN_IF_ERROR(CheckNumel("GeluForward", "y", *y, x.numel()));
  return DoGeluForward(x, y);
}

absl::Status Backend::GeluBackward(const Tensor& dy, const Tensor& x, Tensor* dx) {
  PT_RETURN_IF_ERROR(CheckDevice("GeluBackward", "x", x));
  PT_RETURN_IF_ERROR(CheckNumel("GeluBackward", "dy", dy, x.numel()));
  PT_RETURN_IF_ERROR(CheckNumel("GeluBackward", "dx", *dx, x.numel()));
  return DoGeluBackward(dy, x, dx);
}

// ---- Attention ----

namespace {

// qkv [batch*seq_len, 3H] with H divisible by heads and `out` [batch*seq_len, out_cols].
absl::Status CheckAttentionArgs(absl::string_view op, const Tensor& qkv, int64_t batch,
                                int64_t seq_len, int64_t heads, const char* out_name,
                                const Tensor& out, int64_t out_cols) {
  PT_RETURN_IF_ERROR(CheckDevice(op, "qkv", qkv));
  if (batch <= 0 || seq_len <= 0 || heads <= 0 || Cols(qkv) % (3 * heads) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": bad batch/seq_len/heads ", batch, "/",
                                                   seq_len, "/", heads, " for qkv ",
                                                   ShapeString(qkv.shape())));
  }
  PT_RETURN_IF_ERROR(CheckMatrix(op, "qkv", qkv, batch * seq_len, -1));
  return CheckMatrix(op, out_name, out, batch * seq_len, out_cols);
}

}  // namespace

absl::Status Backend::AttentionForward(const Tensor& qkv, int64_t batch, int64_t seq_len,
                                       int64_t heads, Tensor* out) {
  PT_RETURN_IF_ERROR(CheckAttentionArgs("AttentionForward", qkv, batch, seq_len, heads, "out",
                                        *out, Cols(qkv) / 3));
  return DoAttentionForward(qkv, batch, seq_len, heads, out);
}

absl::Status Backend::AttentionBackward(const Tensor& dout, const Tensor& qkv, int64_t batch,
                                        int64_t seq_len, int64_t heads, Tensor* dqkv) {
  PT_RETURN_IF_ERROR(CheckAttentionArgs("AttentionBackward", qkv, batch, seq_len, heads, "dqkv",
                                        *dqkv, Cols(qkv)));
  PT_RETURN_IF_ERROR(
      CheckMatrix("AttentionBackward", "dout", dout, batch * seq_len, Cols(qkv) / 3));
  return DoAttentionBackward(dout, qkv, batch, seq_len, heads, dqkv);
}

// ---- Cross-entropy ----

namespace {

// `logits` [N,V] on the device, `out` [N,V], one target per row, each kIgnoreTarget or in [0,V).
absl::Status CheckCrossEntropyArgs(absl::string_view op, const char* logits_name,
                                   const Tensor& logits, absl::Span<const int32_t> targets,
                                   const char* out_name, const Tensor& out) {
  PT_RETURN_IF_ERROR(CheckDevice(op, logits_name, logits));
  const int64_t rows = Rows(logits), v = Cols(logits);
  if (static_cast<int64_t>(targets.size()) != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", targets.size(), " targets for ", rows, " rows"));
  }
  PT_RETURN_IF_ERROR(CheckMatrix(op, out_name, out, rows, v));
  return CheckIds(op, targets, v, true);
}

}  // namespace

absl::StatusOr<Backend::CrossEntropyResult> Backend::CrossEntropyForward(
    const Tensor& logits, absl::Span<const int32_t> targets, Tensor* probs) {
  PT_RETURN_IF_ERROR(
      CheckCrossEntropyArgs("CrossEntropyForward", "logits", logits, targets, "probs", *probs));
  return DoCrossEntropyForward(logits, targets, probs);
}

absl::Status Backend::CrossEntropyBackward(const Tensor& probs, absl::Span<const int32_t> targets,
                                           float grad_scale, Tensor* dlogits) {
  PT_RETURN_IF_ERROR(
      CheckCrossEntropyArgs("CrossEntropyBackward", "probs", probs, targets, "dlogits", *dlogits));
  return DoCrossEntropyBackward(probs, targets, grad_scale, dlogits);
}

// ---- Optimizer ----

absl::Status Backend::AdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                                  Tensor* param, Tensor* m, Tensor* v) {
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat("AdamWUpdate: step must be >= 1, got ", step));
  }
  PT_RETURN_IF_ERROR(CheckDevice("AdamWUpdate", "grad", grad));
  const int64_t n = grad.numel();
  PT_RETURN_IF_ERROR(CheckNumel("AdamWUpdate", "param", *param, n));
  PT_RETURN_IF_ERROR(CheckNumel("AdamWUpdate", "m", *m, n));
  PT_RETURN_IF_ERROR(CheckNumel("AdamWUpdate", "v", *v, n));
  return DoAdamWUpdate(config, step, grad, param, m, v);
}

absl::StatusOr<bool> Backend::AllFinite(absl::Span<const Tensor* const> tensors) {
  for (const Tensor* t : tensors) {
    if (t == nullptr) return absl::InvalidArgumentError("AllFinite: a tensor is null");
    PT_RETURN_IF_ERROR(CheckDevice("AllFinite", "tensor", *t));
  }
  return DoAllFinite(tensors);
}

absl::StatusOr<double> Backend::SumOfSquares(const Tensor& t) {
  PT_RETURN_IF_ERROR(CheckDevice("SumOfSquares", "tensor", t));
  return DoSumOfSquares(t);
}

absl::Status Backend::Scale(float scale, Tensor* t) {
  if (t == nullptr) return absl::InvalidArgumentError("Scale: the tensor is null");
  PT_RETURN_IF_ERROR(CheckDevice("Scale", "tensor", *t));
  return DoScale(scale, t);
}

int64_t SumOfSquaresLanes(int64_t n) {
  if (n < 8192) return 1;
  int64_t lanes = 1;
  while (lanes * 2 <= n / 4096 && lanes < (int64_t{1} << 16)) lanes *= 2;
  return lanes;
}

double HostSumOfSquares(absl::Span<const float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t lanes = SumOfSquaresLanes(n);
  std::vector<double> lane(static_cast<size_t>(lanes), 0.0);
  for (int64_t row = 0; row < n; row += lanes) {
    const int64_t width = std::min(lanes, n - row);
    const float* x = values.data() + row;
    for (int64_t j = 0; j < width; ++j) lane[j] += static_cast<double>(x[j]) * x[j];
  }
  double sum = 0;
  for (const double s : lane) sum += s;
  return sum;
}

}  // namespace pipetrain::kernels
