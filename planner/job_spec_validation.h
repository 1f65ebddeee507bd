// ValidateJobSpec: the one place that decides whether a submitted JobSpec is acceptable. Every
// error is InvalidArgument whose message starts with the field path ("training.global_batch:")
// and says what is allowed. Unset (zero) fields that have defaults are accepted; the defaults
// themselves are model::WithDefaults (model/job_model.h).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_PLANNER_JOB_SPEC_VALIDATION_H_
#define PIPETRAIN_PLANNER_JOB_SPEC_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::planner {

// Upper bounds that keep a typo from asking for absurd resources.
inline constexpr int kMaxLayers = 4096;
inline constexpr int kMaxHidden = 65536;
inline constexpr int kMaxSeqLen = 1 << 20;
inline constexpr int kMaxVocab = 1 << 22;
inline constexpr int kMaxWorkers = 4096;
inline constexpr int kMaxMicrobatches = 1 << 16;
inline constexpr int kMaxSteps = 100000000;
inline constexpr int kMaxEvalBatches = 4096;
// What one plan may hold. Each (stage, microbatch) pair becomes up to three compute actions plus
// transfers and copies, all simulated while planning, kept in the job store and carried in one
// gRPC message to every worker: at most this many pairs per step (checked by PlanJob, which
// knows the schedule's chunks)...
inline constexpr int64_t kMaxPlanCells = 1 << 17;
// ...and at most this many bytes of encoded plan, under gRPC's default 4 MiB message limit with
// room for the rest of a PrepareRequest or a Job.
inline constexpr int64_t kMaxPlanBytes = 3 << 20;

absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace pipetrain::planner

#endif  // PIPETRAIN_PLANNER_JOB_SPEC_VALIDATION_H_
