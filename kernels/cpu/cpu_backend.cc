// CpuBackend: allocation, transfers, elementwise ops, GEMM (oneDNN or OpenBLAS per shape,
// gemm_router.h) and AdamW.
#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/status_macros.h"
#include "glog/logging.h"
#include "kernels/bf16.h"
#include "kernels/caching_memory.h"
#include "kernels/cpu/openblas_kernels.h"
#include "kernels/shape_checks.h"

namespace pipetrain::kernels {

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : device_("cpu-device", Location::kDevice,
              options.device_cache_bytes > 0
                  ? std::make_unique<CachingRawMemory>(MakeAlignedHostMemory(),
                                                       options.device_cache_bytes)
                  : MakeAlignedHostMemory(),
              options.device_budget_bytes),
      host_("cpu-host", Location::kHost, MakeAlignedHostMemory(), options.host_budget_bytes),
      bf16_gemm_(options.bf16_gemm),
      vk_(options.portable_kernels   ? &PortableVectorKernels()
          : Avx512VectorKernels() ? Avx512VectorKernels()
          : Avx2VectorKernels()   ? Avx2VectorKernels()
                                  : &PortableVectorKernels()),
      gemm_{options.gemm_routing, options.blas_threads < 1 ? 1 : options.blas_threads} {
  openblas_set_num_threads(gemm_.threads);
  blas_core_ = OpenBlasCoreName();
  gemm_.openblas_narrower = CpuHasAvx512() && !OpenBlasCoreUsesAvx512(blas_core_);
  if (gemm_.openblas_narrower && gemm_.routing == GemmRouting::kPerShape) {
    LOG_FIRST_N(INFO, 1) << "OpenBLAS runs its " << blas_core_
                         << " kernels on an AVX-512 core (OPENBLAS_CORETYPE?): every GEMM goes "
                            "to oneDNN (kernels/cpu/gemm_choice.h)";
  }
}

absl::Status CpuBackend::DoUpload(absl::Span<const float> src, Tensor* dst) {
  if (!src.empty()) std::memcpy(dst->data(), src.data(), src.size() * sizeof(float));
  return absl::OkStatus();
}

absl::Status CpuBackend::DoDownload(const Tensor& src, absl::Span<float> dst) {
  if (!dst.empty()) std::memcpy(dst.data(), src.data(), dst.size() * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CpuBackend::DoCopyToHost(const Tensor& src, absl::string_view what) {
  PT_ASSIGN_OR_RETURN(Tensor dst, host_.Allocate(src.shape(), what, src.dtype()));
  if (src.numel() > 0) std::memcpy(dst.data(), src.data(), src.bytes());
  return dst;
}

absl::StatusOr<Tensor> CpuBackend::DoCopyToDevice(const Tensor& src, absl::string_view what) {
  PT_ASSIGN_OR_RETURN(Tensor dst, device_.Allocate(src.shape(), what, src.dtype()));
  if (src.numel() > 0) std::memcpy(dst.data(), src.data(), src.bytes());
  return dst;
}

absl::Status CpuBackend::DoCopy(const Tensor& src, Tensor* dst) {
  if (src.numel() > 0 && src.data() != dst->data()) {
    std::memcpy(dst->data(), src.data(), src.bytes());
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::DoConvert(const Tensor& src, Tensor* dst) {
  if (src.dtype() == DType::kF32) {
    auto* out = static_cast<uint16_t*>(dst->raw());
    for (int64_t i = 0; i < src.numel(); ++i) out[i] = FloatToBf16Bits(src.data()[i]);
  } else {
    const auto* in = static_cast<const uint16_t*>(src.raw());
    for (int64_t i = 0; i < src.numel(); ++i) dst->data()[i] = Bf16BitsToFloat(in[i]);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::DoFill(float value, Tensor* t) {
  float* p = t->data();
  for (int64_t i = 0; i < t->numel(); ++i) p[i] = value;
  return absl::OkStatus();
}

absl::Status CpuBackend::DoAddInPlace(const Tensor& x, Tensor* y) {
  vk_->add(y->data(), x.data(), x.numel(), y->data());
  return absl::OkStatus();
}

absl::Status CpuBackend::DoAdd(const Tensor& a, const Tensor& b, Tensor* out) {
  vk_->add(a.data(), b.data(), a.numel(), out->data());
  return absl::OkStatus();
}

absl::Status CpuBackend::DoGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                float alpha, float beta, Tensor* c) {
  const int64_t m = trans_a ? Cols(a) : Rows(a);
  const int64_t k = trans_a ? Rows(a) : Cols(a);
  const int64_t n = trans_b ? Rows(b) : Cols(b);
  if (k == 0) {
    float* cp = c->data();
    for (int64_t i = 0; i < m * n; ++i) cp[i] = beta == 0.0f ? 0.0f : beta * cp[i];
    return absl::OkStatus();
  }
  // bf16 inputs are exactly representable in fp32: sgemm accumulates them in fp32.
  ScratchBuffer a16, b16;
  PT_ASSIGN_OR_RETURN(const float* ap, ProductInput(a, "Gemm (bf16 copy of a)", &a16));
  PT_ASSIGN_OR_RETURN(const float* bp, ProductInput(b, "Gemm (bf16 copy of b)", &b16));
  gemm_.Run(trans_a, trans_b, m, n, k, alpha, ap, Cols(a), bp, Cols(b), beta, c->data(), n);
  return absl::OkStatus();
}

absl::StatusOr<const float*> CpuBackend::ProductInput(const Tensor& t, const char* what,
                                                      ScratchBuffer* buffer) {
  if (!bf16_gemm_) return t.data();
  PT_ASSIGN_OR_RETURN(*buffer, device_.AllocateScratch(t.bytes(), what));
  auto* out = static_cast<float*>(buffer->data());
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = RoundToBf16(t.data()[i]);
  return out;
}

absl::Status CpuBackend::DoAddBias(const Tensor& bias, Tensor* y) {
  vk_->add_bias(bias.data(), Rows(*y), Cols(*y), y->data());
  return absl::OkStatus();
}

absl::Status CpuBackend::DoBiasRows(const Tensor& bias, const Tensor* residual, Tensor* out) {
  const int64_t rows = Rows(*out), cols = Cols(*out);
  float* o = out->data();
  for (int64_t r = 0; r < rows; ++r) {
    if (residual != nullptr) {
      vk_->add(residual->data() + r * cols, bias.data(), cols, o + r * cols);
    } else {
      std::copy(bias.data(), bias.data() + cols, o + r * cols);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::DoBiasGrad(const Tensor& dy, bool accumulate, Tensor* db) {
  const int64_t rows = Rows(dy), cols = Cols(dy);
  float* out = db->data();
  if (!accumulate) {
    for (int64_t j = 0; j < cols; ++j) out[j] = 0.0f;
  }
  vk_->bias_grad(dy.data(), rows, cols, out);
  return absl::OkStatus();
}

absl::Status CpuBackend::DoAdamWUpdate(const AdamWConfig& config, int64_t step, const Tensor& grad,
                                       Tensor* param, Tensor* m, Tensor* v) {
  const int64_t n = grad.numel();
  const float bc1 = 1.0f - std::pow(config.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(config.beta2, static_cast<float>(step));
  vk_->adamw(config.lr, config.beta1, config.beta2, config.eps, config.weight_decay, bc1, bc2,
             grad.data(), n, param->data(), m->data(), v->data());
  return absl::OkStatus();
}

absl::StatusOr<bool> CpuBackend::DoAllFinite(absl::Span<const Tensor* const> tensors) {
  for (const Tensor* t : tensors) {
    const float* x = t->data();
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (!std::isfinite(x[i])) return false;
    }
  }
  return true;
}

absl::StatusOr<double> CpuBackend::DoSumOfSquares(const Tensor& t) {
  return HostSumOfSquares(absl::MakeConstSpan(t.data(), t.numel()));
}

absl::Status CpuBackend::DoScale(float scale, Tensor* t) {
  vk_->scale(scale, t->numel(), t->data());
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels
