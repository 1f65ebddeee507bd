// CpuBackend: allocation, transfers, elementwise ops, GEMM (OpenBLAS) and AdamW.
#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels {

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : device_("cpu-device", Location::kDevice, MakeAlignedHostMemory(),
              options.device_budget_bytes),
      host_("cpu-host", Location::kHost, MakeAlignedHostMemory(), options.host_budget_bytes) {
  openblas_set_num_threads(options.blas_threads < 1 ? 1 : options.blas_threads);
}

absl::Status CpuBackend::Upload(absl::Span<const float> src, Tensor* dst) {
  PT_RETURN_IF_ERROR(CheckNumel("Upload", "dst", *dst, static_cast<int64_t>(src.size())));
  if (!src.empty()) std::memcpy(dst->data(), src.data(), src.size() * sizeof(float));
  return absl::OkStatus();
}

absl::Status CpuBackend::Download(const Tensor& src, absl::Span<float> dst) {
  PT_RETURN_IF_ERROR(CheckNumel("Download", "src", src, static_cast<int64_t>(dst.size())));
  if (!dst.empty()) std::memcpy(dst.data(), src.data(), dst.size() * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CpuBackend::CopyToHost(const Tensor& src, absl::string_view what) {
  PT_RETURN_IF_ERROR(CheckDevice("CopyToHost", what, src));
  PT_ASSIGN_OR_RETURN(Tensor dst, host_.Allocate(src.shape(), what));
  if (src.numel() > 0) std::memcpy(dst.data(), src.data(), src.bytes());
  return dst;
}

absl::StatusOr<Tensor> CpuBackend::CopyToDevice(const Tensor& src, absl::string_view what) {
  if (src.empty() || src.location() != Location::kHost) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyToDevice: ", what, " is not a host tensor"));
  }
  PT_ASSIGN_OR_RETURN(Tensor dst, device_.Allocate(src.shape(), what));
  if (src.numel() > 0) std::memcpy(dst.data(), src.data(), src.bytes());
  return dst;
}

absl::Status CpuBackend::Copy(const Tensor& src, Tensor* dst) {
  PT_RETURN_IF_ERROR(CheckDevice("Copy", "src", src));
  PT_RETURN_IF_ERROR(CheckNumel("Copy", "dst", *dst, src.numel()));
  if (src.numel() > 0 && src.data() != dst->data()) {
    std::memcpy(dst->data(), src.data(), src.bytes());
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Fill(float value, Tensor* t) {
  PT_RETURN_IF_ERROR(CheckDevice("Fill", "t", *t));
  float* p = t->data();
  for (int64_t i = 0; i < t->numel(); ++i) p[i] = value;
  return absl::OkStatus();
}

absl::Status CpuBackend::AddInPlace(const Tensor& x, Tensor* y) {
  PT_RETURN_IF_ERROR(CheckDevice("AddInPlace", "x", x));
  PT_RETURN_IF_ERROR(CheckNumel("AddInPlace", "y", *y, x.numel()));
  const float* xp = x.data();
  float* yp = y->data();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] += xp[i];
  return absl::OkStatus();
}

absl::Status CpuBackend::Add(const Tensor& a, const Tensor& b, Tensor* out) {
  PT_RETURN_IF_ERROR(CheckDevice("Add", "a", a));
  PT_RETURN_IF_ERROR(CheckNumel("Add", "b", b, a.numel()));
  PT_RETURN_IF_ERROR(CheckNumel("Add", "out", *out, a.numel()));
  const float* ap = a.data();
  const float* bp = b.data();
  float* op = out->data();
  for (int64_t i = 0; i < a.numel(); ++i) op[i] = ap[i] + bp[i];
  return absl::OkStatus();
}

absl::Status CpuBackend::Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
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
  if (k == 0) {
    float* cp = c->data();
    for (int64_t i = 0; i < m * n; ++i) cp[i] = beta == 0.0f ? 0.0f : beta * cp[i];
    return absl::OkStatus();
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a.data(), static_cast<blasint>(Cols(a)), b.data(),
              static_cast<blasint>(Cols(b)), beta, c->data(), static_cast<blasint>(n));
  return absl::OkStatus();
}

absl::Status CpuBackend::AddBias(const Tensor& bias, Tensor* y) {
  PT_RETURN_IF_ERROR(CheckDevice("AddBias", "y", *y));
  const int64_t rows = Rows(*y), cols = Cols(*y);
  PT_RETURN_IF_ERROR(CheckNumel("AddBias", "bias", bias, cols));
  const float* bp = bias.data();
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y->data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] += bp[j];
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::BiasGrad(const Tensor& dy, bool accumulate, Tensor* db) {
  PT_RETURN_IF_ERROR(CheckDevice("BiasGrad", "dy", dy));
  const int64_t rows = Rows(dy), cols = Cols(dy);
  PT_RETURN_IF_ERROR(CheckNumel("BiasGrad", "db", *db, cols));
  float* out = db->data();
  if (!accumulate) {
    for (int64_t j = 0; j < cols; ++j) out[j] = 0.0f;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* dr = dy.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) out[j] += dr[j];
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::AdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                                     Tensor* param, Tensor* m, Tensor* v) {
  if (step < 1) return absl::InvalidArgumentError("AdamWUpdate: step must be >= 1");
  PT_RETURN_IF_ERROR(CheckDevice("AdamWUpdate", "grad", grad));
  const int64_t n = grad.numel();
  PT_RETURN_IF_ERROR(CheckNumel("AdamWUpdate", "param", *param, n));
  PT_RETURN_IF_ERROR(CheckNumel("AdamWUpdate", "m", *m, n));
  PT_RETURN_IF_ERROR(CheckNumel("AdamWUpdate", "v", *v, n));
  const float bc1 = 1.0f - std::pow(config.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(config.beta2, static_cast<float>(step));
  const float* g = grad.data();
  float* p = param->data();
  float* mp = m->data();
  float* vp = v->data();
  for (int64_t i = 0; i < n; ++i) {
    mp[i] = config.beta1 * mp[i] + (1.0f - config.beta1) * g[i];
    vp[i] = config.beta2 * vp[i] + (1.0f - config.beta2) * g[i] * g[i];
    const float mh = mp[i] / bc1;
    const float vh = vp[i] / bc2;
    p[i] -= config.lr * (mh / (std::sqrt(vh) + config.eps) + config.weight_decay * p[i]);
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels
