// What a JobSpec means for the model, read the same way by the coordinator (to plan) and the
// workers (to build their chunks): every default of the spec, the data source's declared shape,
// the GPT shape and the number of microbatches. Nothing here opens the training data: the shape
// of a data source follows from the spec alone, and the workers check at Prepare that the data
// they open has it.
//
// Every default of a JobSpec field is applied by WithDefaults and nowhere else; job.proto states
// each one in the field's comment (tests/model/job_model_test.cc reads them back).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_MODEL_JOB_MODEL_H_
#define PIPETRAIN_MODEL_JOB_MODEL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "model/gpt_config.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::model {

// Digits of the embedded default task (a+b=c): an 8-layer GPT learns it visibly in ~300 steps.
inline constexpr int kDefaultTaskDigits = 2;

// Sequence length and vocabulary that a data source feeds the model.
struct DataShape {
  int seq_len = 0;
  int vocab = 0;
};

// The spec with every unset (zero or empty) field that has a default set to it, model.preset's
// shape first (model/model_presets.h: it fills the shape fields left 0). Idempotent.
// Fields whose zero is meaningful (seed, weight_decay, offload NONE) are left alone, and so is
// parallelism.chunks_per_worker: its default belongs to the schedule (the generator registry).
v1::JobSpec WithDefaults(const v1::JobSpec& spec);

// The declared shape of training.data: "default" -> the addition task's (3 * digits + 2 tokens,
// 12 symbols); "text" -> model.seq_len (default 64) bytes, 256 symbols; "tokens" ->
// model.seq_len (default 256) tokens, model.vocab_size symbols (InvalidArgument naming
// model.vocab_size when it is unset). InvalidArgument naming training.data.source for an
// unknown source.
absl::StatusOr<DataShape> DeclaredDataShape(const v1::JobSpec& spec);

// The model shape of WithDefaults(spec). InvalidArgument naming the field when model.seq_len
// differs from the data's or model.vocab_size is below it, or the shape is invalid.
absl::StatusOr<GptConfig> ModelConfig(const v1::JobSpec& spec);

// The kind of worker the job must run on: compute.device; UNSPECIFIED: any kind (all of the
// job's workers the same). Both kinds compute bf16 (the CPU by rounding GEMM inputs).
v1::DeviceKind RequiredDeviceKind(const v1::JobSpec& spec);

// Bytes per stashed activation element: 2 for compute.precision PRECISION_BF16, else 4
// (model/cost_model.h's stash_element_bytes).
int64_t StashElementBytes(const v1::JobSpec& spec);

// training.global_batch / training.microbatch_size (0 if the microbatch size is unset).
int NumMicrobatches(const v1::JobSpec& spec);

// parallelism.data_parallel d, the number of pipeline replicas (1 when unset).
int DataParallelSize(const v1::JobSpec& spec);

// Microbatches one replica trains per step: NumMicrobatches / DataParallelSize. Replica r
// trains the step's microbatches r * this .. (r + 1) * this - 1 (docs/data_parallel.md).
int MicrobatchesPerReplica(const v1::JobSpec& spec);

// Workers the job runs on: DataParallelSize x parallelism.num_workers.
int TotalWorkers(const v1::JobSpec& spec);

// Tokens one training step consumes: global_batch x the model's sequence length (0 if the spec
// has no valid model shape).
int64_t TokensPerStep(const v1::JobSpec& spec);

// Model FLOPs of one training step of the spec's model (TrainingStepFlops: the analytic
// per-layer GEMM count of F + B + W over every microbatch); 0 if the spec has no valid model
// shape.
double ModelFlopsPerStep(const v1::JobSpec& spec);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_JOB_MODEL_H_
