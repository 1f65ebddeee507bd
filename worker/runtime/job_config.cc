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

absl::StatusOr<JobData> OpenJobData(const v1::JobSpec& spec) {
  PT_ASSIGN_OR_RETURN(const model::DataShape shape, model::DeclaredDataShape(spec));
  const v1::DataSpec& d = spec.training().data();
  const bool evaluate = spec.eval().interval_steps() > 0;
  const data::Split train_split = evaluate ? data::Split::kTrain : data::Split::kAll;
  JobData job_data;
  if (d.source() == "text") {
    for (const data::Split split : {train_split, data::Split::kValidation}) {
      if (split == data::Split::kValidation && !evaluate) break;
      absl::StatusOr<std::unique_ptr<data::TextDataset>> text =
          data::TextDataset::Open(d.path(), shape.seq_len, spec.training().seed(), split);
      if (!text.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("training.data.path: ", text.status().message()));
      }
      (split == data::Split::kValidation ? job_data.validation : job_data.train) =
          *std::move(text);
    }
  } else if (d.source() == "tokens") {
    // docs/data.md: the file (or a `pipetrain data prepare` directory) is mapped and checked
    // here; val.bin is the validation data.
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
    if (evaluate && corpus->val == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "eval.interval_steps: ", spec.eval().interval_steps(),
          " needs validation data, and training.data.path (", d.path(),
          ") has no val.bin; point it at a `pipetrain data prepare` directory written with "
          "--val-fraction > 0, or set eval.interval_steps: 0"));
    }
    job_data.train = std::move(corpus->train);
    if (evaluate) job_data.validation = std::move(corpus->val);
  } else {
    job_data.train = std::make_unique<data::AdditionTask>(model::kDefaultTaskDigits,
                                                          spec.training().seed(), train_split);
    if (evaluate) {
      job_data.validation = std::make_unique<data::AdditionTask>(
          model::kDefaultTaskDigits, spec.training().seed(), data::Split::kValidation);
    }
  }
  for (const data::Dataset* dataset : {job_data.train.get(), job_data.validation.get()}) {
    if (dataset == nullptr) continue;
    if (dataset->seq_len() != shape.seq_len || dataset->vocab_size() != shape.vocab) {
      return absl::InternalError(absl::StrCat(dataset->name(), " has shape ", dataset->seq_len(),
                                              " x ", dataset->vocab_size(), ", declared ",
                                              shape.seq_len, " x ", shape.vocab));
    }
  }
  return job_data;
}

absl::StatusOr<std::unique_ptr<data::Dataset>> MakeDataset(const v1::JobSpec& spec) {
  PT_ASSIGN_OR_RETURN(JobData job_data, OpenJobData(spec));
  return std::move(job_data.train);
}

bool EvaluationDue(const v1::JobSpec& spec, int completed_steps) {
  const int interval = spec.eval().interval_steps();
  if (interval <= 0 || completed_steps <= 0) return false;
  return completed_steps % interval == 0 || completed_steps == spec.training().steps();
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
