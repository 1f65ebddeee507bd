// Offload plans for the suite. HOOK: the offload planner (coordinator/schedule/offload_*,
// auto_planner; issue 7) is being built; until it is on main these return nothing and the
// suite says so. When it lands, fill OffloadFrontierPoints / the Offload section from it.
#ifndef PIPETRAIN_BENCH_SUITE_OFFLOAD_HOOK_H_
#define PIPETRAIN_BENCH_SUITE_OFFLOAD_HOOK_H_

#include <string>
#include <vector>

namespace pipetrain::bench {

struct OffloadPoint {
  std::string name;  // e.g. "1f1b + full offload"
  double memory_vs_1f1b = 0;
  double throughput_vs_1f1b = 0;
};

// Simulated offload plans for the frontier's p = 8 job (F = B = W); empty until available.
std::vector<OffloadPoint> OffloadFrontierPoints(int p, int m);

// Why there are no offload plans (one sentence).
std::string OffloadPendingNote();

}  // namespace pipetrain::bench

#endif  // PIPETRAIN_BENCH_SUITE_OFFLOAD_HOOK_H_
