// ValidateJobSpec: whether every field of a JobSpec is acceptable, as the coordinator checks at
// submit and a worker checks again at Prepare (it trusts no caller: docs/security.md). Every
// error is InvalidArgument whose message starts with the field path ("training.global_batch:")
// and says what is allowed. Unset (zero) fields that have defaults are accepted; the defaults
// themselves are WithDefaults (model/job_model.h). parallelism.schedule is checked only for
// being a plausible name here; planner::ValidateJobSpec also checks it against the generators
// (a worker runs the plan it is given, not the name).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_MODEL_JOB_SPEC_VALIDATION_H_
#define PIPETRAIN_MODEL_JOB_SPEC_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::model {

// Upper bounds that keep a typo from asking for absurd resources.
inline constexpr int kMaxLayers = 4096;
inline constexpr int kMaxHidden = 65536;
inline constexpr int kMaxSeqLen = 1 << 20;
inline constexpr int kMaxVocab = 1 << 22;
inline constexpr int kMaxWorkers = 4096;
inline constexpr int kMaxChunksPerWorker = 64;
// parallelism.data_parallel: at most this many pipeline replicas.
inline constexpr int kMaxReplicas = 64;
inline constexpr int kMaxMicrobatches = 1 << 16;
inline constexpr int kMaxSteps = 100000000;
inline constexpr int kMaxEvalBatches = 4096;
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_JOB_SPEC_VALIDATION_H_
