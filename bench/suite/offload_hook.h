// Offload plans for the suite's frontier (issue 7's offload pass, simulated).
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

// Simulated offload plans for the frontier's p = m/4 job (F = B = W).
std::vector<OffloadPoint> OffloadFrontierPoints(int p, int m);

// How the offload points were made (one sentence).
std::string OffloadNote();

}  // namespace pipetrain::bench

#endif  // PIPETRAIN_BENCH_SUITE_OFFLOAD_HOOK_H_
