// The AVX2/FMA VectorKernels. This file alone is compiled with -mavx2 -mfma; nothing here runs
// unless CpuHasAvx2Fma() (vector_kernels_portable.cc hands out the table). It includes no
// standard library header with inline functions (vector_kernels.h brings <cstdint>'s typedefs
// only), so no inline library function compiled for AVX2 can be merged into other files' code. A row's last n % 8 elements use masked loads and stores through the same vector
// arithmetic, so each element's result does not depend on its position.
#include <immintrin.h>

#include "kernels/cpu/vector_kernels.h"

namespace pipetrain::kernels {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

// Lanes [0, rem) set.
inline __m256i TailMask(int64_t rem) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rem)), lanes);
}

// Sum of the 8 lanes in a fixed order.
inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HorizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) for 8 lanes (Cephes expf: range reduction by ln 2 in two parts, degree-5 polynomial;
// within 2 ulp of expf on [-87, 87]). Inputs are clamped to [-87, 87] (keeping 2^n a normal
// float); NaN stays NaN (the clamps return their second operand for NaN).
inline __m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(87.0f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i n = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

// tanh(u) = 1 - 2 / (exp(2u) + 1), saturating to +-1.
inline __m256 Tanh(__m256 u) {
  const __m256 e = Exp(_mm256_add_ps(u, u));
  return _mm256_sub_ps(_mm256_set1_ps(1.0f),
                       _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
}

inline __m256 GeluTanhArg(__m256 v) {
  const __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
  return _mm256_mul_ps(_mm256_set1_ps(kGeluC), _mm256_fmadd_ps(_mm256_set1_ps(kGeluA), v3, v));
}

inline __m256 GeluForward8(__m256 v) {
  const __m256 t = Tanh(GeluTanhArg(v));
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                       _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

void GeluForward(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, GeluForward8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = TailMask(n - i);
    _mm256_maskstore_ps(y + i, m, GeluForward8(_mm256_maskload_ps(x + i, m)));
  }
}

inline __m256 GeluBackward8(__m256 dy, __m256 v) {
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 t = Tanh(GeluTanhArg(v));
  // d = 0.5 (1 + t) + 0.5 v (1 - t^2) c (1 + 3 a v^2)
  const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(3.0f * kGeluA), _mm256_mul_ps(v, v), one);
  const __m256 sech2 = _mm256_fnmadd_ps(t, t, one);
  const __m256 right = _mm256_mul_ps(
      _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, v), sech2), _mm256_set1_ps(kGeluC)), inner);
  const __m256 d = _mm256_fmadd_ps(half, _mm256_add_ps(one, t), right);
  return _mm256_mul_ps(dy, d);
}

void GeluBackward(const float* dy, const float* x, int64_t n, float* dx) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dx + i, GeluBackward8(_mm256_loadu_ps(dy + i), _mm256_loadu_ps(x + i)));
  }
  if (i < n) {
    const __m256i m = TailMask(n - i);
    _mm256_maskstore_ps(dx + i, m,
                        GeluBackward8(_mm256_maskload_ps(dy + i, m), _mm256_maskload_ps(x + i, m)));
  }
}

void LayerNormForward(const float* x, const float* g, const float* b, int64_t rows, int64_t h,
                      float eps, float* y, float* mean, float* rstd) {
  const int64_t body = h - h % 8;
  const __m256i tail = TailMask(h - body);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * h;
    float* yr = y + r * h;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < body; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(xr + j));
    if (body < h) acc = _mm256_add_ps(acc, _mm256_maskload_ps(xr + body, tail));
    const float mu = HorizontalSum(acc) / static_cast<float>(h);
    const __m256 vmu = _mm256_set1_ps(mu);
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t j = 0; j < body; j += 8) {
      const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xr + j), vmu);
      vacc = _mm256_fmadd_ps(d, d, vacc);
    }
    if (body < h) {
      const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(xr + body, tail), vmu),
                                     _mm256_castsi256_ps(tail));
      vacc = _mm256_fmadd_ps(d, d, vacc);
    }
    const float var = HorizontalSum(vacc) / static_cast<float>(h);
    const float rs =
        1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(var + eps)));
    const __m256 vrs = _mm256_set1_ps(rs);
    for (int64_t j = 0; j < body; j += 8) {
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmu), vrs);
      _mm256_storeu_ps(yr + j,
                       _mm256_fmadd_ps(xhat, _mm256_loadu_ps(g + j), _mm256_loadu_ps(b + j)));
    }
    if (body < h) {
      const __m256 xhat =
          _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(xr + body, tail), vmu), vrs);
      _mm256_maskstore_ps(yr + body, tail,
                          _mm256_fmadd_ps(xhat, _mm256_maskload_ps(g + body, tail),
                                          _mm256_maskload_ps(b + body, tail)));
    }
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void LayerNormBackwardInput(const float* dy, const float* x, const float* g, const float* mean,
                            const float* rstd, const float* residual, int64_t rows, int64_t h,
                            float* dx) {
  const int64_t body = h - h % 8;
  const __m256i tail = TailMask(h - body);
  const float inv_h = 1.0f / static_cast<float>(h);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * h;
    const float* dr = dy + r * h;
    float* out = dx + r * h;
    const __m256 vmu = _mm256_set1_ps(mean[r]), vrs = _mm256_set1_ps(rstd[r]);
    __m256 sg = _mm256_setzero_ps(), sgx = _mm256_setzero_ps();
    // Masked loads read zeros past the row, which add nothing to either sum.
    for (int64_t j = 0; j < h; j += 8) {
      const bool full = j < body;
      const __m256 dv = full ? _mm256_loadu_ps(dr + j) : _mm256_maskload_ps(dr + j, tail);
      const __m256 gv = full ? _mm256_loadu_ps(g + j) : _mm256_maskload_ps(g + j, tail);
      const __m256 xv = full ? _mm256_loadu_ps(xr + j) : _mm256_maskload_ps(xr + j, tail);
      const __m256 gj = _mm256_mul_ps(dv, gv);
      sg = _mm256_add_ps(sg, gj);
      sgx = _mm256_fmadd_ps(gj, _mm256_mul_ps(_mm256_sub_ps(xv, vmu), vrs), sgx);
    }
    const __m256 mg = _mm256_set1_ps(HorizontalSum(sg) * inv_h);
    const __m256 mgx = _mm256_set1_ps(HorizontalSum(sgx) * inv_h);
    for (int64_t j = 0; j < h; j += 8) {
      const bool full = j < body;
      const __m256 dv = full ? _mm256_loadu_ps(dr + j) : _mm256_maskload_ps(dr + j, tail);
      const __m256 gv = full ? _mm256_loadu_ps(g + j) : _mm256_maskload_ps(g + j, tail);
      const __m256 xv = full ? _mm256_loadu_ps(xr + j) : _mm256_maskload_ps(xr + j, tail);
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(xv, vmu), vrs);
      __m256 o = _mm256_mul_ps(
          vrs, _mm256_fnmadd_ps(xhat, mgx, _mm256_sub_ps(_mm256_mul_ps(dv, gv), mg)));
      if (residual != nullptr) {
        const float* rr = residual + r * h + j;
        o = _mm256_add_ps(o, full ? _mm256_loadu_ps(rr) : _mm256_maskload_ps(rr, tail));
      }
      if (full) {
        _mm256_storeu_ps(out + j, o);
      } else {
        _mm256_maskstore_ps(out + j, tail, o);
      }
    }
  }
}

void LayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                             const float* rstd, int64_t rows, int64_t h, float* dg, float* db) {
  const int64_t body = h - h % 8;
  const __m256i tail = TailMask(h - body);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * h;
    const float* dr = dy + r * h;
    const __m256 vmu = _mm256_set1_ps(mean[r]), vrs = _mm256_set1_ps(rstd[r]);
    for (int64_t j = 0; j < h; j += 8) {
      if (j < body) {
        const __m256 dv = _mm256_loadu_ps(dr + j);
        const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmu), vrs);
        _mm256_storeu_ps(dg + j, _mm256_fmadd_ps(dv, xhat, _mm256_loadu_ps(dg + j)));
        _mm256_storeu_ps(db + j, _mm256_add_ps(_mm256_loadu_ps(db + j), dv));
      } else {
        const __m256 dv = _mm256_maskload_ps(dr + j, tail);
        const __m256 xhat =
            _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(xr + j, tail), vmu), vrs);
        _mm256_maskstore_ps(dg + j, tail,
                            _mm256_fmadd_ps(dv, xhat, _mm256_maskload_ps(dg + j, tail)));
        _mm256_maskstore_ps(db + j, tail, _mm256_add_ps(_mm256_maskload_ps(db + j, tail), dv));
      }
    }
  }
}

// y[j] = y[j] + x[j] for one row of n.
inline void AddRow(const float* x, int64_t n, float* y) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    _mm256_storeu_ps(y + j, _mm256_add_ps(_mm256_loadu_ps(y + j), _mm256_loadu_ps(x + j)));
  }
  if (j < n) {
    const __m256i m = TailMask(n - j);
    _mm256_maskstore_ps(y + j, m,
                        _mm256_add_ps(_mm256_maskload_ps(y + j, m), _mm256_maskload_ps(x + j, m)));
  }
}

void AddBias(const float* bias, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) AddRow(bias, cols, y + r * cols);
}

void BiasGrad(const float* dy, int64_t rows, int64_t cols, float* db) {
  for (int64_t r = 0; r < rows; ++r) AddRow(dy + r * cols, cols, db);
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  if (i < n) {
    const __m256i m = TailMask(n - i);
    _mm256_maskstore_ps(out + i, m,
                        _mm256_add_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

void Scale(float s, int64_t n, float* x) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  if (i < n) {
    const __m256i m = TailMask(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vs));
  }
}

float RowMax(const float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = neg_inf;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + j));
  if (j < n) {
    const __m256i m = TailMask(n - j);
    mx = _mm256_max_ps(
        mx, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + j, m), _mm256_castsi256_ps(m)));
  }
  return HorizontalMax(mx);
}

float ExpShiftSum(const float* x, float shift, int64_t n, float* out) {
  const __m256 vs = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs));
    _mm256_storeu_ps(out + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < n) {
    const __m256i m = TailMask(n - j);
    const __m256 e = _mm256_and_ps(Exp(_mm256_sub_ps(_mm256_maskload_ps(x + j, m), vs)),
                                   _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(out + j, m, e);
    acc = _mm256_add_ps(acc, e);
  }
  return HorizontalSum(acc);
}

float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  }
  if (j < n) {
    const __m256i m = TailMask(n - j);
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + j, m), _mm256_maskload_ps(b + j, m), acc);
  }
  return HorizontalSum(acc);
}

void SoftmaxBackwardRow(const float* p, float dot, float scale, int64_t n, float* dp) {
  const __m256 vd = _mm256_set1_ps(dot), vs = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 sp = _mm256_mul_ps(vs, _mm256_loadu_ps(p + j));
    _mm256_storeu_ps(dp + j, _mm256_mul_ps(sp, _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd)));
  }
  if (j < n) {
    const __m256i m = TailMask(n - j);
    const __m256 sp = _mm256_mul_ps(vs, _mm256_maskload_ps(p + j, m));
    _mm256_maskstore_ps(dp + j, m,
                        _mm256_mul_ps(sp, _mm256_sub_ps(_mm256_maskload_ps(dp + j, m), vd)));
  }
}

inline void AdamW8(const __m256* c, __m256i mask, bool full, const float* g, float* p, float* m,
                   float* v) {
  // c: beta1, 1 - beta1, beta2, 1 - beta2, bc1, bc2, lr, eps, weight decay.
  const __m256 gv = full ? _mm256_loadu_ps(g) : _mm256_maskload_ps(g, mask);
  __m256 mv = full ? _mm256_loadu_ps(m) : _mm256_maskload_ps(m, mask);
  __m256 vv = full ? _mm256_loadu_ps(v) : _mm256_maskload_ps(v, mask);
  const __m256 pv = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
  mv = _mm256_fmadd_ps(c[0], mv, _mm256_mul_ps(c[1], gv));
  vv = _mm256_fmadd_ps(c[2], vv, _mm256_mul_ps(_mm256_mul_ps(c[3], gv), gv));
  const __m256 mh = _mm256_div_ps(mv, c[4]);
  const __m256 vh = _mm256_div_ps(vv, c[5]);
  const __m256 upd =
      _mm256_fmadd_ps(c[8], pv, _mm256_div_ps(mh, _mm256_add_ps(_mm256_sqrt_ps(vh), c[7])));
  const __m256 pn = _mm256_fnmadd_ps(c[6], upd, pv);
  if (full) {
    _mm256_storeu_ps(m, mv);
    _mm256_storeu_ps(v, vv);
    _mm256_storeu_ps(p, pn);
  } else {
    _mm256_maskstore_ps(m, mask, mv);
    _mm256_maskstore_ps(v, mask, vv);
    _mm256_maskstore_ps(p, mask, pn);
  }
}

void AdamW(float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
           const float* g, int64_t n, float* p, float* m, float* v) {
  const __m256 c[9] = {_mm256_set1_ps(beta1), _mm256_set1_ps(1.0f - beta1),
                       _mm256_set1_ps(beta2), _mm256_set1_ps(1.0f - beta2),
                       _mm256_set1_ps(bc1),   _mm256_set1_ps(bc2),
                       _mm256_set1_ps(lr),    _mm256_set1_ps(eps),
                       _mm256_set1_ps(wd)};
  int64_t i = 0;
  const __m256i all = _mm256_set1_epi32(-1);
  for (; i + 8 <= n; i += 8) AdamW8(c, all, true, g + i, p + i, m + i, v + i);
  if (i < n) AdamW8(c, TailMask(n - i), false, g + i, p + i, m + i, v + i);
}

}  // namespace

// Constant-initialised (no code runs to build it), so merely linking this file is safe on any
// CPU.
extern const VectorKernels kAvx2VectorKernels;
const VectorKernels kAvx2VectorKernels = {
    "avx2-fma",       GeluForward, GeluBackward, LayerNormForward, LayerNormBackwardInput,
    LayerNormBackwardWeight, AddBias, BiasGrad, Add, Scale, RowMax, ExpShiftSum, Dot,
    SoftmaxBackwardRow, AdamW};

}  // namespace pipetrain::kernels
