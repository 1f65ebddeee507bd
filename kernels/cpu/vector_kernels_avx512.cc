// The elementwise VectorKernels 16 floats at a time (AVX-512F), for CPUs that have it. This file
// alone is compiled with -mavx512f -mavx2 -mfma and, like the AVX2 file, includes no standard
// library header with inline functions. Every function here computes each element with exactly
// the AVX2 table's operations in the same order (the same exp polynomial, the same FMAs, IEEE
// division and square root), only twice as wide, and a row's tail goes through masked loads
// and stores of the same code: the results are bitwise the AVX2 table's (tests/kernels check
// it), so choosing this table changes no number. The reductions (LayerNorm, softmax sums, dot)
// stay the AVX2 table's: a 16-lane reduction would sum in another order.
#include <immintrin.h>

#include "kernels/cpu/vector_kernels.h"

namespace pipetrain::kernels {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

// Lanes [0, rem) set, rem < 16.
inline __mmask16 TailMask(int64_t rem) { return static_cast<__mmask16>((1u << rem) - 1u); }

// The AVX2 table's exp, 16 lanes (see vector_kernels_avx2.cc).
inline __m512 Exp(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(87.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i n = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvttps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(n));
}

inline __m512 Tanh(__m512 u) {
  const __m512 e = Exp(_mm512_add_ps(u, u));
  return _mm512_sub_ps(_mm512_set1_ps(1.0f),
                       _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
}

inline __m512 GeluTanhArg(__m512 v) {
  const __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
  return _mm512_mul_ps(_mm512_set1_ps(kGeluC), _mm512_fmadd_ps(_mm512_set1_ps(kGeluA), v3, v));
}

inline __m512 GeluForward16(__m512 v) {
  const __m512 t = Tanh(GeluTanhArg(v));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v),
                       _mm512_add_ps(_mm512_set1_ps(1.0f), t));
}

void GeluForward(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, GeluForward16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(y + i, m, GeluForward16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

inline __m512 GeluBackward16(__m512 dy, __m512 v) {
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  const __m512 t = Tanh(GeluTanhArg(v));
  const __m512 inner = _mm512_fmadd_ps(_mm512_set1_ps(3.0f * kGeluA), _mm512_mul_ps(v, v), one);
  const __m512 sech2 = _mm512_fnmadd_ps(t, t, one);
  const __m512 right = _mm512_mul_ps(
      _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(half, v), sech2), _mm512_set1_ps(kGeluC)), inner);
  const __m512 d = _mm512_fmadd_ps(half, _mm512_add_ps(one, t), right);
  return _mm512_mul_ps(dy, d);
}

void GeluBackward(const float* dy, const float* x, int64_t n, float* dx) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dx + i, GeluBackward16(_mm512_loadu_ps(dy + i), _mm512_loadu_ps(x + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(
        dx + i, m, GeluBackward16(_mm512_maskz_loadu_ps(m, dy + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(out + i, m,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void AddBias(const float* bias, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) Add(y + r * cols, bias, cols, y + r * cols);
}

void BiasGrad(const float* dy, int64_t rows, int64_t cols, float* db) {
  for (int64_t r = 0; r < rows; ++r) Add(db, dy + r * cols, cols, db);
}

void Scale(float s, int64_t n, float* x) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
  }
}

void SoftmaxBackwardRow(const float* p, float dot, float scale, int64_t n, float* dp) {
  const __m512 vd = _mm512_set1_ps(dot), vs = _mm512_set1_ps(scale);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 sp = _mm512_mul_ps(vs, _mm512_loadu_ps(p + j));
    _mm512_storeu_ps(dp + j, _mm512_mul_ps(sp, _mm512_sub_ps(_mm512_loadu_ps(dp + j), vd)));
  }
  if (j < n) {
    const __mmask16 m = TailMask(n - j);
    const __m512 sp = _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, p + j));
    _mm512_mask_storeu_ps(dp + j, m,
                          _mm512_mul_ps(sp, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dp + j), vd)));
  }
}

// c: beta1, 1 - beta1, beta2, 1 - beta2, bc1, bc2, lr, eps, weight decay.
inline void AdamW16(const __m512* c, __mmask16 mask, const float* g, float* p, float* m,
                    float* v) {
  const __m512 gv = _mm512_maskz_loadu_ps(mask, g);
  __m512 mv = _mm512_maskz_loadu_ps(mask, m);
  __m512 vv = _mm512_maskz_loadu_ps(mask, v);
  const __m512 pv = _mm512_maskz_loadu_ps(mask, p);
  mv = _mm512_fmadd_ps(c[0], mv, _mm512_mul_ps(c[1], gv));
  vv = _mm512_fmadd_ps(c[2], vv, _mm512_mul_ps(_mm512_mul_ps(c[3], gv), gv));
  const __m512 mh = _mm512_div_ps(mv, c[4]);
  const __m512 vh = _mm512_div_ps(vv, c[5]);
  const __m512 upd =
      _mm512_fmadd_ps(c[8], pv, _mm512_div_ps(mh, _mm512_add_ps(_mm512_sqrt_ps(vh), c[7])));
  const __m512 pn = _mm512_fnmadd_ps(c[6], upd, pv);
  _mm512_mask_storeu_ps(m, mask, mv);
  _mm512_mask_storeu_ps(v, mask, vv);
  _mm512_mask_storeu_ps(p, mask, pn);
}

void AdamW(float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
           const float* g, int64_t n, float* p, float* m, float* v) {
  const __m512 c[9] = {_mm512_set1_ps(beta1), _mm512_set1_ps(1.0f - beta1),
                       _mm512_set1_ps(beta2), _mm512_set1_ps(1.0f - beta2),
                       _mm512_set1_ps(bc1),   _mm512_set1_ps(bc2),
                       _mm512_set1_ps(lr),    _mm512_set1_ps(eps),
                       _mm512_set1_ps(wd)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) AdamW16(c, 0xFFFF, g + i, p + i, m + i, v + i);
  if (i < n) AdamW16(c, TailMask(n - i), g + i, p + i, m + i, v + i);
}

}  // namespace

// The elementwise entries only (the reductions are null: Avx512VectorKernels() takes them from
// the AVX2 table). Constant-initialised, so merely linking this file is safe on any CPU.
extern const VectorKernels kAvx512ElementwiseKernels;
const VectorKernels kAvx512ElementwiseKernels = {
    "avx512",  GeluForward, GeluBackward, nullptr, nullptr, nullptr, AddBias, BiasGrad, Add, Scale,
    nullptr,   nullptr,     nullptr,      SoftmaxBackwardRow, AdamW};

}  // namespace pipetrain::kernels
