// Shared CPU hosts: the simulator gives every worker its own device, but CPU workers started on
// one machine (the local cluster: four workers on a two-core box) share its cores and cannot all
// compute at once. Then a step needs at least the CPU time of those workers' compute divided by
// the host's cores. Measured on the default job: 4 workers on 2 cores ran 0.137 s steps against
// 0.071 s simulated, while 2 workers on the same 2 cores ran 0.128 s against 0.127 s; the bound
// (0.119 s there) is the missing term.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_COORDINATOR_SHARED_CPU_H_
#define PIPETRAIN_COORDINATOR_SHARED_CPU_H_

#include <string>
#include <vector>

#include "pipetrain/v1/plan.pb.h"

namespace pipetrain::coordinator {

// Where one rank computes, as its worker registered it.
struct RankHost {
  std::string host;      // empty: not a CPU worker (GPU, emulated): it shares nothing
  int cpu_cores = 0;     // CPUs the worker may use; 0 (unknown) leaves the host out
  int compute_threads = 1;
};

// Sets prediction->shared_cpu_step_s and shared_cpu_note from the busiest host whose ranks run
// more compute threads than it has cores, when that bound exceeds makespan_s; clears them
// otherwise. ranks[r] is rank r; prediction->busy_s gives each rank's compute time.
void ApplySharedCpuBound(const std::vector<RankHost>& ranks, v1::Prediction* prediction);

// The step time to expect: the larger of the simulated makespan and the shared-CPU bound.
double PredictedStepSeconds(const v1::Prediction& prediction);

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_SHARED_CPU_H_
