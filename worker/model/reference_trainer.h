// ReferenceTrainer: single-process training of the whole model as one GptChunk. It is the oracle
// the pipelined runtime must reproduce (same losses, same weights).
// One step (step numbers start at 1):
//   ZeroGrad; for m = 0..M-1: mb = dataset.Get(step, m, microbatch_size);
//     F(m, tokens, targets, loss_scale = 1/M); BW(m)       (so W runs in microbatch order)
//   ClipAndStep (gradient_clipping.h): the global gradient norm; if every gradient is finite,
//   the gradients scaled by the clip coefficient (when optimizer.clip_grad_norm > 0) and
//   OptimizerStep(optimizer, step); else the update is skipped, as every pipeline rank skips it
//   (the step still counts, for the schedule and AdamW's t)
// Reported loss = sum_m loss_m / M (loss_m = mean token loss of microbatch m), i.e. the mean loss
// when microbatches have equal target counts. With GradAccumulation::kMicrobatchOrdered (the
// default) the gradients are summed per parameter in microbatch order no matter in which order
// W runs, so a pipelined run with the same config, seed and the same ordered mode reproduces the
// weights bitwise (given the same backend and BLAS thread count).
// Thread-safety: not thread-safe.
#ifndef PIPETRAIN_WORKER_MODEL_REFERENCE_TRAINER_H_
#define PIPETRAIN_WORKER_MODEL_REFERENCE_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "worker/data/dataset.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain::model {

struct ReferenceTrainerConfig {
  GptConfig model;  // vocab and seq_len must match the dataset
  int num_microbatches = 4;
  int microbatch_size = 16;
  // AdamW's constants (every field set by the caller), the learning-rate schedule and the decay
  // groups; a job's: worker::OptimizerSettingsOf(spec).
  OptimizerSettings optimizer;
  uint64_t seed = 1234;  // model initialisation
  GradAccumulation grad_accumulation = GradAccumulation::kMicrobatchOrdered;
  // A bf16 job: activations stashed in bf16 (ChunkOptions::stash_bf16); the backend must round
  // GEMM inputs too (bf16_gemm) for the job's numerics.
  bool stash_bf16 = false;
};

struct StepStats {
  int64_t step = 0;
  double loss = 0;
  double token_accuracy = 0;  // argmax accuracy on this step's scored positions (before update)
  double exact_match = 0;     // fraction of sequences with every scored position right
  double seconds = 0;
  bool update_skipped = false;  // a gradient held a NaN or Inf: no update this step
  double grad_norm = 0;         // global L2 norm of the gradients, before clipping
  bool grad_clipped = false;    // the gradients were scaled down (optimizer.clip_grad_norm)
};

class ReferenceTrainer {
 public:
  // InvalidArgument if the model does not match the dataset or the config is bad.
  static absl::StatusOr<std::unique_ptr<ReferenceTrainer>> Create(
      kernels::Backend* backend, const data::Dataset* dataset,
      const ReferenceTrainerConfig& config);

  absl::StatusOr<StepStats> Step();
  // Loss/accuracy on `count` microbatches of a held-out stream (step ids -1, -2, ...), no update.
  absl::StatusOr<StepStats> Evaluate(int count);
  // A job's validation pass (docs/training.md, "Evaluation"): the mean loss over validation
  // microbatches 0..batches-1 of `validation` (data::ValidationMicrobatch), summed loss / M in
  // microbatch order, which the pipeline's last stage reproduces bitwise. No update.
  absl::StatusOr<StepStats> Validate(const data::Dataset& validation, int batches);

  int64_t steps_done() const { return step_; }
  GptChunk* model() { return chunk_.get(); }

 private:
  // Forward only over `count` microbatches (loss averaged in microbatch order, accuracy);
  // `chunk_ids`: the chunk keys each microbatch by its index, else all by one spare id.
  absl::StatusOr<StepStats> ForwardOnly(int count,
                                        const std::function<data::Microbatch(int)>& microbatch,
                                        bool chunk_ids);
  ReferenceTrainer(const data::Dataset* dataset, const ReferenceTrainerConfig& config)
      : dataset_(dataset), config_(config) {}
  const data::Dataset* dataset_;
  ReferenceTrainerConfig config_;
  std::unique_ptr<GptChunk> chunk_;
  int64_t step_ = 0;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_REFERENCE_TRAINER_H_
