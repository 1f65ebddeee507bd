// RunFromPlanFile: runs one rank of a plan without a coordinator, from a plan file (a
// pipetrain.v1.PrepareRequest in protobuf JSON: job spec, plan, every rank's address). Prints
// one line per step (ending in "checkpoint_step N" when the step wrote checkpoint step-N);
// optionally writes per-step JSON lines and Chrome traces. This is how the runtime is tested and
// debugged on its own. With resume_from (a checkpoint root, like the spec's checkpoint.dir) the
// rank loads <resume_from>/step-<start_step>/stage-<s>.ckpt and runs from start_step.
//
// Thread-safety: call once, from main.
#ifndef PIPETRAIN_WORKER_SERVICE_PLAN_FILE_RUN_H_
#define PIPETRAIN_WORKER_SERVICE_PLAN_FILE_RUN_H_

#include <string>

#include "absl/status/status.h"
#include "worker/runtime/worker_session.h"

namespace pipetrain::worker {

struct PlanFileRunConfig {
  std::string plan_path;
  int rank = -1;
  int steps = 0;            // 0: the job's training.steps - start_step
  std::string resume_from;  // checkpoint root to resume from (empty: fresh start)
  int start_step = 0;       // first step to run (the checkpoint's step when resuming)
  std::string trace_dir;    // write step-N.rank-R.trace.json here when set
  std::string report_path;  // one JSON object per step when set
  SessionOptions session;
};

absl::Status RunFromPlanFile(const PlanFileRunConfig& config);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_PLAN_FILE_RUN_H_
