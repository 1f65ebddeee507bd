#include "worker/runtime/job_config.h"

#include "absl/strings/str_cat.h"
#include "worker/data/addition_task.h"
#include "worker/data/text_dataset.h"

namespace pipetrain::worker {

absl::StatusOr<std::unique_ptr<data::Dataset>> MakeDataset(const v1::JobSpec& spec) {
  const v1::DataSpec& d = spec.training().data();
  if (d.source().empty() || d.source() == "default") {
    return std::unique_ptr<data::Dataset>(
        new data::AdditionTask(kDefaultTaskDigits, spec.training().seed()));
  }
  if (d.source() == "text") {
    const int seq_len = spec.model().seq_len() > 0 ? spec.model().seq_len() : 64;
    auto ds = data::TextDataset::Open(d.path(), seq_len, spec.training().seed());
    if (!ds.ok()) return ds.status();
    return std::unique_ptr<data::Dataset>(std::move(*ds));
  }
  return absl::InvalidArgumentError(absl::StrCat("training.data.source: \"", d.source(),
                                                 "\" is not one of: default, text"));
}

absl::StatusOr<model::GptConfig> ModelConfig(const v1::JobSpec& spec,
                                             const data::Dataset& dataset) {
  const v1::ModelSpec& m = spec.model();
  model::GptConfig c;
  c.num_layers = m.num_layers();
  c.hidden = m.hidden();
  c.heads = m.num_heads();
  c.ffn = m.ffn_hidden() > 0 ? m.ffn_hidden() : 4 * m.hidden();
  c.seq_len = m.seq_len() > 0 ? m.seq_len() : dataset.seq_len();
  c.vocab = m.vocab_size() > 0 ? m.vocab_size() : dataset.vocab_size();
  if (c.seq_len != dataset.seq_len()) {
    return absl::InvalidArgumentError(absl::StrCat("model.seq_len: ", c.seq_len, " but the ",
                                                   dataset.name(), " data has sequences of ",
                                                   dataset.seq_len(), " tokens (or leave it 0)"));
  }
  if (c.vocab < dataset.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.vocab_size: ", c.vocab, " is smaller than the ", dataset.name(),
                     " vocabulary of ", dataset.vocab_size(), " (or leave it 0)"));
  }
  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", s.message()));
  }
  return c;
}

kernels::AdamWConfig OptimizerConfig(const v1::JobSpec& spec) {
  const v1::OptimizerSpec& o = spec.training().optimizer();
  kernels::AdamWConfig a;
  a.lr = o.learning_rate() > 0 ? static_cast<float>(o.learning_rate()) : 3e-3f;
  a.beta1 = o.beta1() > 0 ? static_cast<float>(o.beta1()) : 0.9f;
  a.beta2 = o.beta2() > 0 ? static_cast<float>(o.beta2()) : 0.99f;
  a.eps = o.epsilon() > 0 ? static_cast<float>(o.epsilon()) : 1e-8f;
  a.weight_decay = static_cast<float>(o.weight_decay());
  return a;
}

data::Microbatch TrainingMicrobatch(const data::Dataset& dataset, int step, int microbatch,
                                    int microbatch_size) {
  return dataset.Get(step + 1, microbatch, microbatch_size);
}

int NumMicrobatches(const v1::JobSpec& spec) {
  const int mbs = spec.training().microbatch_size();
  return mbs > 0 ? spec.training().global_batch() / mbs : 0;
}

}  // namespace pipetrain::worker
