// Turning a JobSpec (wire contract) into what the runtime builds: the dataset, the model shape,
// the optimizer, the number of microbatches. Shared by the worker (to build its chunks) and the
// coordinator's planner (to size the cost model), so both read the spec the same way.
// Defaults for unset (zero) fields are applied here and nowhere else.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_WORKER_RUNTIME_JOB_CONFIG_H_
#define PIPETRAIN_WORKER_RUNTIME_JOB_CONFIG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "pipetrain/v1/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/model/gpt_config.h"

namespace pipetrain::worker {

// Digits of the embedded default task (a+b=c): seq_len 3*digits+2, vocabulary 12.
inline constexpr int kDefaultTaskDigits = 2;  // an 8-layer GPT learns it visibly in ~300 steps

// "default" (or empty): the embedded addition task; "text": bytes of training.data.path.
absl::StatusOr<std::unique_ptr<data::Dataset>> MakeDataset(const v1::JobSpec& spec);
// Model shape; seq_len and vocab default to (and must agree with) the dataset's.
absl::StatusOr<model::GptConfig> ModelConfig(const v1::JobSpec& spec,
                                             const data::Dataset& dataset);
kernels::AdamWConfig OptimizerConfig(const v1::JobSpec& spec);
// The microbatch that step `step` (0-based, as the executor counts) trains on. The reference
// trainer counts steps from 1 (AdamW's t) and asks the dataset for step t, so this is Get(step+1).
data::Microbatch TrainingMicrobatch(const data::Dataset& dataset, int step, int microbatch,
                                    int microbatch_size);
// global_batch / microbatch_size.
int NumMicrobatches(const v1::JobSpec& spec);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_JOB_CONFIG_H_
