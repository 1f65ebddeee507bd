// The core's measured fp32 peak: a loop of independent FMAs with no memory traffic, the physical
// limit every kernel and chunk figure is compared with (issue 26), at the widest vector width
// the core has (AVX-512 where present: its BLAS kernels use it). Each loop lives in its own file
// compiled for its instruction set; call it only when the CPU has that set.
#ifndef PIPETRAIN_BENCH_KERNELS_FMA_PEAK_H_
#define PIPETRAIN_BENCH_KERNELS_FMA_PEAK_H_

#include <cstdint>

namespace pipetrain::bench {

// Runs `iterations` rounds of 12 independent 8-wide FMA chains (enough to cover the FMA latency
// on two FMA ports) and returns a value derived from the accumulators, so the loop is not elided.
// Each round is 12 * 8 * 2 = 192 fp32 FLOPs.
float FmaPeakLoop(int64_t iterations);
inline constexpr double kFmaPeakFlopsPerIteration = 192.0;

// The same with 16-wide AVX-512 FMAs: 12 * 16 * 2 = 384 FLOPs per round. Only when
// CpuHasAvx512F().
float FmaPeakLoop512(int64_t iterations);
inline constexpr double kFmaPeak512FlopsPerIteration = 384.0;
bool CpuHasAvx512F();

}  // namespace pipetrain::bench

#endif  // PIPETRAIN_BENCH_KERNELS_FMA_PEAK_H_
