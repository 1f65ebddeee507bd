#include "worker/runtime/job_config.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/job_model.h"
#include "model/lr_schedule.h"
#include "model/token_corpus.h"
#include "worker/data/addition_task.h"
#include "worker/data/text_dataset.h"
#include "worker/data/token_corpus_reader.h"

namespace pipetrain::worker {

absl::StatusOr<std::unique_ptr<data::Dataset>> MakeDataset(const v1::JobSpec& spec) {
  PT_ASSIGN_OR_RETURN(const model::DataShape shape, model::DeclaredDataShape(spec));
  const v1::DataSpec& d = spec.training().data();
  std::unique_ptr<data::Dataset> dataset;
  if (d.source() == "text") {
    absl::StatusOr<std::unique_ptr<data::TextDataset>> text =
        data::TextDataset::Open(d.path(), shape.seq_len, spec.training().seed());
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("training.data.path: ", text.status().message()));
    }
    dataset = *std::move(text);
  } else if (d.source() == "tokens") {
    // docs/data.md: the file (or a `pipetrain data prepare` directory) is mapped and checked
    // here; val.bin is checked but not trained on.
    const std::optional<model::TokenDtype> dtype = model::ParseTokenDtype(
        d.token_dtype().empty() ? model::kDefaultTokenDtype : d.token_dtype());
    if (!dtype.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("training.data.token_dtype: \"",
                                                     d.token_dtype(),
                                                     "\" is not one of: uint16, uint32"));
    }
    data::TokenDataset::Options options;
    options.dtype = *dtype;
    options.seq_len = shape.seq_len;
    options.vocab_size = shape.vocab;
    options.seed = spec.training().seed();
    absl::StatusOr<data::TokenCorpus> corpus = data::OpenTokenCorpus(d.path(), options);
    if (!corpus.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("training.data.path: ", corpus.status().message()));
    }
    dataset = std::move(corpus->train);
  } else {
    dataset = std::make_unique<data::AdditionTask>(model::kDefaultTaskDigits,
                                                   spec.training().seed());
  }
  if (dataset->seq_len() != shape.seq_len || dataset->vocab_size() != shape.vocab) {
    return absl::InternalError(absl::StrCat(dataset->name(), " has shape ", dataset->seq_len(),
                                            " x ", dataset->vocab_size(), ", declared ",
                                            shape.seq_len, " x ", shape.vocab));
  }
  return dataset;
}

kernels::AdamWConfig OptimizerConfig(const v1::JobSpec& spec) {
  const v1::OptimizerSpec o = model::WithDefaults(spec).training().optimizer();
  kernels::AdamWConfig a;
  a.lr = static_cast<float>(o.learning_rate());
  a.beta1 = static_cast<float>(o.beta1());
  a.beta2 = static_cast<float>(o.beta2());
  a.eps = static_cast<float>(o.epsilon());
  a.weight_decay = static_cast<float>(o.weight_decay());
  return a;
}

absl::StatusOr<model::OptimizerSettings> OptimizerSettingsOf(const v1::JobSpec& spec) {
  model::OptimizerSettings settings;
  settings.adamw = OptimizerConfig(spec);
  PT_ASSIGN_OR_RETURN(settings.lr_schedule, model::LrScheduleOf(spec));
  const v1::OptimizerSpec& o = spec.training().optimizer();
  settings.decay.embeddings = o.decay_embeddings();
  settings.decay.norms_and_biases = o.decay_norms_and_biases();
  settings.clip_grad_norm = o.clip_grad_norm();
  return settings;
}

data::Microbatch TrainingMicrobatch(const data::Dataset& dataset, int step, int microbatch,
                                    int microbatch_size) {
  return dataset.Get(step + 1, microbatch, microbatch_size);
}

}  // namespace pipetrain::worker
