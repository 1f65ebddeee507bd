#include "worker/model/reference_trainer.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/gradient_clipping.h"

namespace pipetrain::model {

absl::StatusOr<std::unique_ptr<ReferenceTrainer>> ReferenceTrainer::Create(
    kernels::Backend* backend, const data::Dataset* dataset, const ReferenceTrainerConfig& config) {
  if (config.model.vocab != dataset->vocab_size() || config.model.seq_len != dataset->seq_len()) {
    return absl::InvalidArgumentError(absl::StrCat("model vocab/seq_len ", config.model.vocab, "/",
                                                   config.model.seq_len, " do not match dataset ",
                                                   dataset->name(), " (", dataset->vocab_size(),
                                                   "/", dataset->seq_len(), ")"));
  }
  if (config.num_microbatches <= 0 || config.microbatch_size <= 0) {
    return absl::InvalidArgumentError("num_microbatches and microbatch_size must be > 0");
  }
  std::unique_ptr<ReferenceTrainer> t(new ReferenceTrainer(dataset, config));
  PT_ASSIGN_OR_RETURN(t->chunk_, GptChunk::Create(backend, config.model, WholeModel(config.model),
                                                  {.seed = config.seed,
                                                   .grad_accumulation = config.grad_accumulation,
                                                   .stash_bf16 = config.stash_bf16}));
  return t;
}

absl::StatusOr<StepStats> ReferenceTrainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  const int64_t step = step_ + 1;
  const int m_count = config_.num_microbatches;
  PT_RETURN_IF_ERROR(chunk_->ZeroGrad());
  StepStats stats;
  stats.step = step;
  data::Accuracy acc;
  for (int m = 0; m < m_count; ++m) {
    const data::Microbatch mb = dataset_->Get(step, m, config_.microbatch_size);
    PT_ASSIGN_OR_RETURN(ForwardOutput out,
                        chunk_->Forward(m, {mb.tokens, kernels::Tensor(), mb.targets,
                                            1.0f / static_cast<float>(m_count)}));
    stats.loss += out.loss / m_count;
    acc.Add(data::Score(mb, out.predictions));
    PT_ASSIGN_OR_RETURN(kernels::Tensor dx, chunk_->Backward(m, kernels::Tensor()));
  }
  // The pipeline's rule (worker/runtime/executor.h): non-finite gradients skip the update.
  PT_ASSIGN_OR_RETURN(const ClipVerdict verdict, ClipAndStep(*chunk_, config_.optimizer, step));
  stats.update_skipped = !verdict.finite;
  stats.grad_norm = verdict.norm;
  stats.grad_clipped = verdict.clipped;
  step_ = step;
  stats.token_accuracy = acc.token_accuracy();
  stats.exact_match = acc.exact_match();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

absl::StatusOr<StepStats> ReferenceTrainer::ForwardOnly(
    int count, const std::function<data::Microbatch(int)>& microbatch, bool chunk_ids) {
  StepStats stats;
  data::Accuracy acc;
  constexpr int kEvalMb = 1 << 30;
  for (int i = 0; i < count; ++i) {
    const data::Microbatch mb = microbatch(i);
    const int id = chunk_ids ? i : kEvalMb;
    PT_ASSIGN_OR_RETURN(ForwardOutput out,
                        chunk_->Forward(id, {mb.tokens, kernels::Tensor(), mb.targets, 1.0f}));
    chunk_->Discard(id);
    stats.loss += out.loss / count;
    acc.Add(data::Score(mb, out.predictions));
  }
  stats.step = step_;
  stats.token_accuracy = acc.token_accuracy();
  stats.exact_match = acc.exact_match();
  return stats;
}

absl::StatusOr<StepStats> ReferenceTrainer::Evaluate(int count) {
  return ForwardOnly(
      count, [&](int i) { return dataset_->Get(-1 - i, 0, config_.microbatch_size); },
      /*chunk_ids=*/false);
}

absl::StatusOr<StepStats> ReferenceTrainer::Validate(const data::Dataset& validation,
                                                     int batches) {
  if (batches < 1) return absl::InvalidArgumentError("a validation pass needs >= 1 microbatch");
  return ForwardOnly(
      batches,
      [&](int i) { return data::ValidationMicrobatch(validation, i, config_.microbatch_size); },
      /*chunk_ids=*/true);
}

}  // namespace pipetrain::model
