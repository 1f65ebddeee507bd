#include "model/job_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/cost_model.h"
#include "model/token_corpus.h"
#include "model/model_presets.h"

namespace pipetrain::model {
namespace {

// The defaults, stated again in job.proto's comments.
constexpr char kDefaultSchedule[] = "auto";
constexpr char kDefaultOptimizer[] = "adamw";
constexpr double kDefaultLearningRate = 3e-3;
constexpr double kDefaultBeta1 = 0.9;
constexpr double kDefaultBeta2 = 0.95;
constexpr double kDefaultEpsilon = 1e-8;
constexpr char kDefaultDataSource[] = "default";
constexpr int kDefaultTextSeqLen = 64;
constexpr int kDefaultKeepLast = 3;
constexpr int kDefaultMaxRestarts = 3;
constexpr char kDefaultLrSchedule[] = "constant";
constexpr int kDefaultEvalBatches = 8;

}  // namespace

v1::JobSpec WithDefaults(const v1::JobSpec& spec) {
  v1::JobSpec s = spec;
  v1::ModelSpec* m = s.mutable_model();
  // A preset first: its shape is what the defaults below (ffn, data shape) follow.
  *m = WithModelPreset(*m);
  if (m->ffn_hidden() == 0) m->set_ffn_hidden(4 * m->hidden());
  v1::TrainingSpec* t = s.mutable_training();
  v1::DataSpec* d = t->mutable_data();
  if (d->source().empty()) d->set_source(kDefaultDataSource);
  // Token datasets: the id width, for that source only (docs/data.md).
  if (d->source() == "tokens" && d->token_dtype().empty()) d->set_token_dtype(kDefaultTokenDtype);
  if (absl::StatusOr<DataShape> shape = DeclaredDataShape(s); shape.ok()) {
    if (m->seq_len() == 0) m->set_seq_len(shape->seq_len);
    if (m->vocab_size() == 0) m->set_vocab_size(shape->vocab);
  }
  v1::OptimizerSpec* o = t->mutable_optimizer();
  if (o->name().empty()) o->set_name(kDefaultOptimizer);
  if (o->learning_rate() == 0) o->set_learning_rate(kDefaultLearningRate);
  if (o->beta1() == 0) o->set_beta1(kDefaultBeta1);
  if (o->beta2() == 0) o->set_beta2(kDefaultBeta2);
  if (o->epsilon() == 0) o->set_epsilon(kDefaultEpsilon);
  // The schedule (model/lr_schedule.h); warmup_steps, min_lr_ratio, the decay groups' and
  // clip_grad_norm's (no clipping) defaults are their zeros.
  if (o->lr_schedule().empty()) o->set_lr_schedule(kDefaultLrSchedule);
  v1::ParallelismSpec* p = s.mutable_parallelism();
  if (p->schedule().empty()) p->set_schedule(kDefaultSchedule);
  if (p->data_parallel() == 0) p->set_data_parallel(1);
  v1::MemorySpec* mem = s.mutable_memory();
  if (mem->offload() == v1::OFFLOAD_POLICY_UNSPECIFIED) mem->set_offload(v1::OFFLOAD_POLICY_NONE);
  v1::ComputeSpec* compute = s.mutable_compute();
  if (compute->precision() == v1::PRECISION_UNSPECIFIED) compute->set_precision(v1::PRECISION_FP32);
  v1::CheckpointSpec* c = s.mutable_checkpoint();
  if (c->keep_last() == 0) c->set_keep_last(kDefaultKeepLast);
  if (s.max_restarts() == 0) s.set_max_restarts(kDefaultMaxRestarts);
  // Evaluation is off unless eval.interval_steps is set; its batch count has a default either way.
  if (s.eval().batches() == 0) s.mutable_eval()->set_batches(kDefaultEvalBatches);
  return s;
}

absl::StatusOr<DataShape> DeclaredDataShape(const v1::JobSpec& spec) {
  const std::string& source = spec.training().data().source();
  if (source.empty() || source == "default") {
    return DataShape{3 * kDefaultTaskDigits + 2, 12};
  }
  if (source == "text") {
    // A preset's sequence length counts as set (the shape WithDefaults will give the model).
    const int model_seq_len = WithModelPreset(spec.model()).seq_len();
    const int seq_len = model_seq_len > 0 ? model_seq_len : kDefaultTextSeqLen;
    return DataShape{seq_len, 256};
  }
  if (source == "tokens") {
    // The coordinator never opens the files, so the spec (or its preset) declares the
    // vocabulary; the workers check at Prepare that every id in the files is below it.
    const v1::ModelSpec model = WithModelPreset(spec.model());
    if (model.vocab_size() <= 0) {
      return absl::InvalidArgumentError(
          "model.vocab_size: required when training.data.source is \"tokens\" (the coordinator "
          "never opens the data; `pipetrain data prepare` prints it)");
    }
    const int seq_len = model.seq_len() > 0 ? model.seq_len() : kDefaultTokensSeqLen;
    return DataShape{seq_len, model.vocab_size()};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("training.data.source: \"", source, "\" is not one of: default, text, tokens"));
}

absl::StatusOr<GptConfig> ModelConfig(const v1::JobSpec& spec) {
  if (const std::string& preset = spec.model().preset();
      !preset.empty() && FindModelPreset(preset) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.preset: \"", preset, "\" is not allowed; allowed: ", ModelPresetNames()));
  }
  const v1::JobSpec s = WithDefaults(spec);
  absl::StatusOr<DataShape> data = DeclaredDataShape(s);
  if (!data.ok()) return data.status();
  const v1::ModelSpec& m = s.model();
  GptConfig c;
  c.num_layers = m.num_layers();
  c.hidden = m.hidden();
  c.heads = m.num_heads();
  c.ffn = m.ffn_hidden();
  c.seq_len = m.seq_len();
  c.vocab = m.vocab_size();
  c.tie_embeddings = m.tie_embeddings();
  const std::string& source = s.training().data().source();
  if (c.seq_len != data->seq_len) {
    // A preset's sequence length is overridden by setting the field (it cannot be left 0).
    const bool from_preset = spec.model().seq_len() == 0 && !spec.model().preset().empty();
    return absl::InvalidArgumentError(absl::StrCat(
        "model.seq_len: ", c.seq_len,
        from_preset ? absl::StrCat(" (from model.preset \"", spec.model().preset(), "\")") : "",
        " but the ", source, " data has sequences of ", data->seq_len, " tokens",
        from_preset ? absl::StrCat("; set model.seq_len: ", data->seq_len) : " (or leave it 0)"));
  }
  if (c.vocab < data->vocab) {
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", c.vocab,
                                                   " is smaller than the ", source,
                                                   " vocabulary of ", data->vocab,
                                                   " (or leave it 0)"));
  }
  if (absl::Status status = c.Validate(); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", status.message()));
  }
  return c;
}

v1::DeviceKind RequiredDeviceKind(const v1::JobSpec& spec) {
  // Data parallelism needs real compute: an unset device means CPU workers (a job names
  // DEVICE_KIND_CUDA to run its replicas on GPUs; docs/data_parallel.md).
  if (DataParallelSize(spec) > 1 && spec.compute().device() == v1::DEVICE_KIND_UNSPECIFIED) {
    return v1::DEVICE_KIND_CPU;
  }
  return spec.compute().device();
}

int64_t StashElementBytes(const v1::JobSpec& spec) {
  return spec.compute().precision() == v1::PRECISION_BF16 ? 2 : 4;
}

int NumMicrobatches(const v1::JobSpec& spec) {
  const int mbs = spec.training().microbatch_size();
  return mbs > 0 ? spec.training().global_batch() / mbs : 0;
}

int DataParallelSize(const v1::JobSpec& spec) {
  return std::max(1, spec.parallelism().data_parallel());
}

int MicrobatchesPerReplica(const v1::JobSpec& spec) {
  return NumMicrobatches(spec) / DataParallelSize(spec);
}

int TotalWorkers(const v1::JobSpec& spec) {
  return DataParallelSize(spec) * spec.parallelism().num_workers();
}

int64_t TokensPerStep(const v1::JobSpec& spec) {
  absl::StatusOr<GptConfig> config = ModelConfig(spec);
  if (!config.ok()) return 0;
  return static_cast<int64_t>(spec.training().global_batch()) * config->seq_len;
}

double ModelFlopsPerStep(const v1::JobSpec& spec) {
  absl::StatusOr<GptConfig> config = ModelConfig(spec);
  if (!config.ok() || spec.training().microbatch_size() <= 0) return 0;
  return TrainingStepFlops(*config, spec.training().microbatch_size(), NumMicrobatches(spec));
}

}  // namespace pipetrain::model
