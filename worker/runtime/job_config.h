// What a worker builds from a JobSpec besides the model shape (model/job_model.h): the dataset it
// reads and the optimizer settings its kernels take. Spec defaults are model::WithDefaults's;
// nothing here picks a default of its own.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_WORKER_RUNTIME_JOB_CONFIG_H_
#define PIPETRAIN_WORKER_RUNTIME_JOB_CONFIG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "pipetrain/v1/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/model/optimizer_settings.h"

namespace pipetrain::worker {

// Opens training.data on this worker: "default" builds the embedded addition task, "text" reads
// training.data.path, "tokens" maps training.data.path (a token file or a `pipetrain data
// prepare` directory, docs/data.md). The dataset has the spec's declared shape
// (model::DeclaredDataShape). Errors name the field: InvalidArgument "training.data.path:
// <file>: <why>" for a file this worker cannot use (the file may be the directory's train.bin,
// val.bin or meta.json), so the job fails at Prepare with the reason.
absl::StatusOr<std::unique_ptr<data::Dataset>> MakeDataset(const v1::JobSpec& spec);

// The training data and, when the job evaluates (eval.interval_steps > 0), the validation data
// (docs/data.md, "Validation data"): "tokens" -> the directory's val.bin (a job that evaluates
// without one fails, naming eval.interval_steps and training.data.path); "text" -> the file's
// last tenth, which training then never reads; "default" -> the held-out addition problems,
// which training then never draws. Without evaluation `validation` is null and `train` is the
// whole source, exactly as MakeDataset gives it.
struct JobData {
  std::unique_ptr<data::Dataset> train;
  std::unique_ptr<data::Dataset> validation;
};
absl::StatusOr<JobData> OpenJobData(const v1::JobSpec& spec);

// Whether a validation pass runs once `completed_steps` steps are done: every
// eval.interval_steps and after the last of training.steps; never with interval 0.
bool EvaluationDue(const v1::JobSpec& spec, int completed_steps);
// training.optimizer with its defaults applied, as the kernels take it.
kernels::AdamWConfig OptimizerConfig(const v1::JobSpec& spec);
// Everything the job's optimizer steps apply: OptimizerConfig, the learning-rate schedule
// (model::LrScheduleOf) and the weight-decay groups. InvalidArgument naming the field for an
// unknown training.optimizer.lr_schedule.
absl::StatusOr<model::OptimizerSettings> OptimizerSettingsOf(const v1::JobSpec& spec);
// The microbatch that step `step` (0-based, as the executor counts) trains on. The reference
// trainer counts steps from 1 (AdamW's t) and asks the dataset for step t, so this is Get(step+1).
data::Microbatch TrainingMicrobatch(const data::Dataset& dataset, int step, int microbatch,
                                    int microbatch_size);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_JOB_CONFIG_H_
