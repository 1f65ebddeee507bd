#include "bench/kernels/fma_peak.h"

#include <immintrin.h>

namespace pipetrain::bench {

float FmaPeakLoop(int64_t iterations) {
  // 12 accumulators: two FMA units x 4-5 cycles latency need at least 10 chains in flight.
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0] + out[7];
}

bool CpuHasAvx512F() {
  // Compiled with -mavx2 -mfma only; the check itself uses no vector instructions.
  return __builtin_cpu_supports("avx512f");
}

}  // namespace pipetrain::bench
