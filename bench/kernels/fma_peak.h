// The core's measured fp32 peak: a loop of independent AVX2 FMAs with no memory traffic, the
// physical limit every kernel and chunk figure is compared with (issue 26). Compiled with AVX2/FMA
// enabled for this file only; call it only when CpuHasAvx2Fma() (kernels/cpu/cpu_features.h).
#ifndef PIPETRAIN_BENCH_KERNELS_FMA_PEAK_H_
#define PIPETRAIN_BENCH_KERNELS_FMA_PEAK_H_

#include <cstdint>

namespace pipetrain::bench {

// Runs `iterations` rounds of 12 independent 8-wide FMA chains (enough to cover the FMA latency
// on two FMA ports) and returns a value derived from the accumulators, so the loop is not elided.
// Each round is 12 * 8 * 2 = 192 fp32 FLOPs.
float FmaPeakLoop(int64_t iterations);
inline constexpr double kFmaPeakFlopsPerIteration = 192.0;

}  // namespace pipetrain::bench

#endif  // PIPETRAIN_BENCH_KERNELS_FMA_PEAK_H_
