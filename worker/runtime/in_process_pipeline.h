// RunInProcess: runs every worker of a schedule as a thread of this process, each with its own
// executor and stage runner, over an in-memory transport. Used by tests (exact training, memory
// and timing checks) and by the emulated benchmark; real deployments run one process per
// worker (pipetrain-worker) over TCP.
//
// Thread-safety: the call is synchronous; runners must not be shared between workers.
#ifndef PIPETRAIN_WORKER_RUNTIME_IN_PROCESS_PIPELINE_H_
#define PIPETRAIN_WORKER_RUNTIME_IN_PROCESS_PIPELINE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/schedule.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/stage_runner.h"
#include "worker/transport/fake_transport.h"

namespace pipetrain::worker {

// Runs `steps` steps and settles the last one's update (Executor::SettlePendingUpdate), so the
// runners hold the final weights; returns results indexed [worker][step]. If any worker fails, the
// others are unblocked (the failed rank is killed on the hub) and the first error is returned.
absl::StatusOr<std::vector<std::vector<StepResult>>> RunInProcess(
    const schedule::Schedule& schedule, const std::vector<StageRunner*>& runners, int steps,
    FakeTransportHub* hub, ExecutorOptions options = {});

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_IN_PROCESS_PIPELINE_H_
