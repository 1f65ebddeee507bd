// ApplySharedHost: offline planning for CPU workers that will share one host's cores (the local
// cluster, or bench/data_parallel: d x p worker processes on this machine). The coordinator
// learns each worker's host and cores at registration and corrects the prediction itself
// (coordinator/shared_cpu.h); `pipetrain plan --host-cores C` has no workers to ask, so it says
// how many cores the job's workers will share, and the plan is simulated again with all d x p of
// them (one compute thread each) on those cores (schedule/shared_core_simulator.h, the
// replicas' gradient sums and the step's CPU work, PlannedJob::cpu_work, included). Without it, the split search (data_parallel_search.h)
// compares splits as if every worker had a device, where replicas look free; on shared cores
// they are not, because the replicas compute at once.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_PLANNER_SHARED_HOST_H_
#define PIPETRAIN_PLANNER_SHARED_HOST_H_

#include "absl/status/status.h"
#include "planner/planner.h"

namespace pipetrain::planner {

// When the job's d x p workers (d = planned->plan.data_parallel(), at least 1) outnumber
// `cores`, sets the prediction's shared_cpu_step_s and shared_cpu_note; clears them otherwise
// (or when cores <= 0). Errors from the shared-core simulation pass through.
absl::Status ApplySharedHost(int cores, PlannedJob* planned);

// The step to compare plans by: the shared-core step when set, else the step with the gradient
// sums across replicas when set, else the makespan.
double ExpectedStepSeconds(const v1::Prediction& prediction);

}  // namespace pipetrain::planner

#endif  // PIPETRAIN_PLANNER_SHARED_HOST_H_
