// SimulateSharedCores: the step time of a schedule when workers share CPU cores. The simulator
// (simulator.h) gives every worker a device of its own; CPU workers started on one machine (the
// local cluster: four workers on two cores) share its cores, and then a compute action runs at
// the speed the operating system's fair sharing gives it: with n compute threads busy on a host
// of c cores, each runs at min(1, c / n) of its full speed. This simulates exactly that (processor
// sharing, recomputed at every start and end of a compute action), with the same dependencies and
// transfer latency as the simulator; copies (OFFLOAD/RELOAD) take no time here.
//
// Measured on the default job (4 workers, 2 cores, profiled costs): see docs/BENCHMARKS.md and
// coordinator/shared_cpu.h.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_SHARED_CORE_SIMULATOR_H_
#define PIPETRAIN_SCHEDULE_SHARED_CORE_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct CoreSharing {
  // Per worker: its host (index into host_cores), or -1 for a device of its own.
  std::vector<int> host_of_worker;
  std::vector<double> host_cores;      // cores of each host (> 0)
  std::vector<int> threads_of_worker;  // compute threads of each worker (>= 1)
};

// The makespan of one step (first start to last end). InvalidArgument for sizes that do not
// match the schedule; FailedPrecondition if the schedule deadlocks.
absl::StatusOr<double> SimulateSharedCores(const Schedule& schedule, const CostModel& costs,
                                           const CoreSharing& sharing);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SHARED_CORE_SIMULATOR_H_
