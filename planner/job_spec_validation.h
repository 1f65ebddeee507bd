// planner::ValidateJobSpec: the one place that decides whether a submitted JobSpec is acceptable:
// every field as model::ValidateJobSpec checks it (model/job_spec_validation.h: the same checks a
// worker runs at Prepare), and parallelism.schedule against the registered generators. Errors are
// InvalidArgument naming the field and what is allowed. The plan limits below are checked by
// PlanJob, which knows the schedule's chunks.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_PLANNER_JOB_SPEC_VALIDATION_H_
#define PIPETRAIN_PLANNER_JOB_SPEC_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "model/job_spec_validation.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::planner {

using model::kMaxEvalBatches;
using model::kMaxHidden;
using model::kMaxLayers;
using model::kMaxMicrobatches;
using model::kMaxSeqLen;
using model::kMaxSteps;
using model::kMaxVocab;
using model::kMaxWorkers;

// What one plan may hold. Each (stage, microbatch) pair becomes up to three compute actions plus
// transfers and copies, all simulated while planning, kept in the job store and carried in one
// gRPC message to every worker: at most this many pairs per step...
inline constexpr int64_t kMaxPlanCells = 1 << 17;
// ...and at most this many bytes of encoded plan, under gRPC's default 4 MiB message limit with
// room for the rest of a PrepareRequest or a Job.
inline constexpr int64_t kMaxPlanBytes = 3 << 20;

absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace pipetrain::planner

#endif  // PIPETRAIN_PLANNER_JOB_SPEC_VALIDATION_H_
