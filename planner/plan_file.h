// Plan files: one job planned offline and run without a coordinator. A plan file is a
// pipetrain.v1.PrepareRequest in protobuf JSON -- the job spec with its defaults filled in, the
// whole plan, every rank's transport address and a job id that ties the ranks' connections
// together -- exactly what `pipetrain-worker --plan FILE --rank R` reads
// (worker/service/plan_file_run.h), which sets the rank and resume point itself.
// `pipetrain plan --job job.yaml` writes one; the end-to-end tests and benchmarks write theirs
// through this too, so there is one writer.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_PLANNER_PLAN_FILE_H_
#define PIPETRAIN_PLANNER_PLAN_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipetrain/v1/job.pb.h"
#include "pipetrain/v1/plan.pb.h"
#include "pipetrain/v1/worker.pb.h"

namespace pipetrain::planner {

struct PlanFileOptions {
  // Ties the ranks' connections together; runs of different plan files on one host need
  // different ids.
  std::string job_id = "plan-file";
  // host:port of each rank's transport listener, by rank. Empty: 127.0.0.1:<base_port + rank>.
  std::vector<std::string> addresses;
  int base_port = 29500;
};

// InvalidArgument naming the option when the addresses do not give one per rank of `plan`, an
// address is not host:port, or the ports would leave 1..65535.
absl::StatusOr<v1::PrepareRequest> MakePlanFile(const v1::JobSpec& spec, const v1::Plan& plan,
                                                const PlanFileOptions& options = {});

// MakePlanFile as the JSON document a plan file holds.
absl::StatusOr<std::string> PlanFileJson(const v1::JobSpec& spec, const v1::Plan& plan,
                                         const PlanFileOptions& options = {});

}  // namespace pipetrain::planner

#endif  // PIPETRAIN_PLANNER_PLAN_FILE_H_
