#include "model/job_spec_validation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/lr_schedule.h"
#include "model/model_presets.h"
#include "model/token_corpus.h"

namespace pipetrain::model {
namespace {

absl::Status Bad(absl::string_view field, const absl::AlphaNum& value, absl::string_view allowed) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", value.Piece(), " is not allowed; ", allowed));
}

absl::Status Range(absl::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return Bad(field, value, absl::StrCat("allowed: ", lo, "..", hi));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  // model.preset: a known name; the shape fields are checked as the preset fills them.
  if (const std::string& preset = spec.model().preset();
      !preset.empty() && model::FindModelPreset(preset) == nullptr) {
    return Bad("model.preset", absl::StrCat("\"", preset, "\""),
               absl::StrCat("allowed: ", model::ModelPresetNames()));
  }
  const v1::ModelSpec m = model::WithModelPreset(spec.model());
  if (absl::Status s = Range("model.num_layers", m.num_layers(), 1, kMaxLayers); !s.ok()) return s;
  if (absl::Status s = Range("model.hidden", m.hidden(), 1, kMaxHidden); !s.ok()) return s;
  if (absl::Status s = Range("model.num_heads", m.num_heads(), 1, m.hidden()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.num_heads: ", m.num_heads(), " is not allowed; allowed: 1..model.hidden (",
        m.hidden(), ") and a divisor of it"));
  }
  if (m.hidden() % m.num_heads() != 0) {
    return Bad("model.num_heads", m.num_heads(),
               absl::StrCat("it must divide model.hidden (", m.hidden(), ")"));
  }
  if (absl::Status s = Range("model.ffn_hidden", m.ffn_hidden(), 0, 16 * kMaxHidden); !s.ok()) {
    return s;
  }
  if (absl::Status s = Range("model.seq_len", m.seq_len(), 0, kMaxSeqLen); !s.ok()) return s;
  if (absl::Status s = Range("model.vocab_size", m.vocab_size(), 0, kMaxVocab); !s.ok()) return s;

  const v1::TrainingSpec& t = spec.training();
  if (absl::Status s = Range("training.steps", t.steps(), 1, kMaxSteps); !s.ok()) return s;
  if (absl::Status s = Range("training.microbatch_size", t.microbatch_size(), 1, 1 << 20);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Range("training.global_batch", t.global_batch(), 1, 1 << 30); !s.ok()) {
    return s;
  }
  if (t.global_batch() % t.microbatch_size() != 0) {
    return Bad("training.global_batch", t.global_batch(),
               absl::StrCat("it must be a multiple of training.microbatch_size (",
                            t.microbatch_size(), ")"));
  }
  if (t.global_batch() / t.microbatch_size() > kMaxMicrobatches) {
    return Bad("training.global_batch", t.global_batch(),
               absl::StrCat("at most ", kMaxMicrobatches, " microbatches per step"));
  }
  const v1::OptimizerSpec& o = t.optimizer();
  if (!o.name().empty() && o.name() != "adamw") {
    return Bad("training.optimizer.name", absl::StrCat("\"", o.name(), "\""), "allowed: adamw");
  }
  if (!std::isfinite(o.learning_rate()) || o.learning_rate() < 0 || o.learning_rate() > 10) {
    return Bad("training.optimizer.learning_rate", o.learning_rate(),
               "allowed: 0 < lr <= 10 (0 means the default 3e-3)");
  }
  for (auto [name, beta] : {std::pair<const char*, double>{"beta1", o.beta1()},
                            std::pair<const char*, double>{"beta2", o.beta2()}}) {
    if (!std::isfinite(beta) || beta < 0 || beta >= 1) {
      return Bad(absl::StrCat("training.optimizer.", name), beta,
                 "allowed: 0 <= beta < 1 (0 means the default)");
    }
  }
  if (!std::isfinite(o.epsilon()) || o.epsilon() < 0 || o.epsilon() > 1) {
    return Bad("training.optimizer.epsilon", o.epsilon(), "allowed: 0..1");
  }
  if (!std::isfinite(o.weight_decay()) || o.weight_decay() < 0 || o.weight_decay() > 1) {
    return Bad("training.optimizer.weight_decay", o.weight_decay(), "allowed: 0..1");
  }
  // The learning-rate schedule (model/lr_schedule.h).
  if (const std::vector<std::string>& names = model::LrScheduleNames();
      !o.lr_schedule().empty() &&
      std::find(names.begin(), names.end(), o.lr_schedule()) == names.end()) {
    return Bad("training.optimizer.lr_schedule", absl::StrCat("\"", o.lr_schedule(), "\""),
               absl::StrCat("allowed: ", absl::StrJoin(names, ", ")));
  }
  if (o.warmup_steps() < 0 || o.warmup_steps() > t.steps()) {
    return Bad("training.optimizer.warmup_steps", o.warmup_steps(),
               absl::StrCat("allowed: 0..training.steps (", t.steps(), ")"));
  }
  if (!std::isfinite(o.min_lr_ratio()) || o.min_lr_ratio() < 0 || o.min_lr_ratio() > 1) {
    return Bad("training.optimizer.min_lr_ratio", o.min_lr_ratio(), "allowed: 0..1");
  }
  if (!std::isfinite(o.clip_grad_norm()) || o.clip_grad_norm() < 0) {
    return Bad("training.optimizer.clip_grad_norm", o.clip_grad_norm(),
               "allowed: a finite number >= 0 (0 = no clipping)");
  }

  const v1::DataSpec& d = t.data();
  if (!d.source().empty() && d.source() != "default" && d.source() != "text" &&
      d.source() != "tokens") {
    return Bad("training.data.source", absl::StrCat("\"", d.source(), "\""),
               "allowed: default, text, tokens");
  }
  if (d.source() == "text" && d.path().empty()) {
    return absl::InvalidArgumentError(
        "training.data.path: required when training.data.source is \"text\"");
  }
  // Token datasets (docs/data.md): the coordinator cannot look into the files, so the spec
  // must say what the workers will check.
  if (d.source() == "tokens") {
    if (d.path().empty()) {
      return absl::InvalidArgumentError(
          "training.data.path: required when training.data.source is \"tokens\" (a token file "
          "or a directory written by `pipetrain data prepare`)");
    }
    if (m.vocab_size() == 0) {
      return absl::InvalidArgumentError(
          "model.vocab_size: required when training.data.source is \"tokens\" (the coordinator "
          "never opens the data; `pipetrain data prepare` prints it)");
    }
    if (!d.token_dtype().empty() && !model::ParseTokenDtype(d.token_dtype()).has_value()) {
      return Bad("training.data.token_dtype", absl::StrCat("\"", d.token_dtype(), "\""),
                 "allowed: uint16, uint32 (or unset: uint16)");
    }
  } else if (!d.token_dtype().empty()) {
    return Bad("training.data.token_dtype", absl::StrCat("\"", d.token_dtype(), "\""),
               "it is only for training.data.source \"tokens\"");
  }

  const v1::ParallelismSpec& p = spec.parallelism();
  if (absl::Status s = Range("parallelism.num_workers", p.num_workers(), 1, kMaxWorkers);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          Range("parallelism.chunks_per_worker", p.chunks_per_worker(), 0, kMaxChunksPerWorker);
      !s.ok()) {
    return s;
  }
  if (p.schedule().size() > 64) {
    return Bad("parallelism.schedule", absl::StrCat(p.schedule().size(), " characters"),
               "a schedule name has at most 64");
  }
  // Data parallelism (docs/data_parallel.md).
  if (absl::Status s = Range("parallelism.data_parallel", p.data_parallel(), 0, kMaxReplicas);
      !s.ok()) {
    return s;
  }
  if (const int dp = std::max(1, p.data_parallel()); dp > 1) {
    if (int64_t{dp} * p.num_workers() > kMaxWorkers) {
      return Bad("parallelism.data_parallel", dp,
                 absl::StrCat("data_parallel x num_workers (", p.num_workers(),
                              ") workers must be at most ", kMaxWorkers));
    }
    const int microbatches = t.global_batch() / t.microbatch_size();
    if (microbatches % dp != 0) {
      return Bad("training.global_batch", t.global_batch(),
                 absl::StrCat("with parallelism.data_parallel ", dp,
                              " each replica trains an equal share of every step's microbatches: "
                              "global_batch / microbatch_size (",
                              microbatches, ") must be a multiple of ", dp,
                              ", i.e. global_batch a multiple of ",
                              int64_t{dp} * t.microbatch_size()));
    }
    if (spec.compute().device() == v1::DEVICE_KIND_EMULATED) {
      return Bad("parallelism.data_parallel", dp,
                 "emulated compute has no gradients to sum across replicas; use "
                 "compute.device DEVICE_KIND_CPU or data_parallel 1");
    }
  }

  const v1::MemorySpec& mem = spec.memory();
  if (mem.device_budget_bytes() < 0) {
    return Bad("memory.device_budget_bytes", mem.device_budget_bytes(),
               "allowed: 0 (unlimited) or a positive byte count");
  }
  if (!v1::OffloadPolicy_IsValid(mem.offload())) {
    return Bad("memory.offload", static_cast<int>(mem.offload()),
               "allowed: OFFLOAD_POLICY_NONE, _HALF, _FULL, _SELECTIVE, _AUTO");
  }
  if (mem.offload() == v1::OFFLOAD_POLICY_SELECTIVE && mem.device_budget_bytes() <= 0) {
    return Bad("memory.offload", "OFFLOAD_POLICY_SELECTIVE",
               "needs memory.device_budget_bytes > 0 (the peak to reach)");
  }
  if (!std::isfinite(mem.host_link_bytes_per_s()) || mem.host_link_bytes_per_s() < 0) {
    return Bad("memory.host_link_bytes_per_s", mem.host_link_bytes_per_s(), "allowed: >= 0");
  }

  const v1::ComputeSpec& compute = spec.compute();
  if (!v1::DeviceKind_IsValid(compute.device())) {
    return Bad("compute.device", static_cast<int>(compute.device()),
               "allowed: DEVICE_KIND_CPU, DEVICE_KIND_CUDA, DEVICE_KIND_EMULATED, or unset (any)");
  }
  if (!v1::Precision_IsValid(compute.precision())) {
    return Bad("compute.precision", static_cast<int>(compute.precision()),
               "allowed: PRECISION_FP32, PRECISION_BF16");
  }

  const v1::CheckpointSpec& c = spec.checkpoint();
  if (absl::Status s = Range("checkpoint.interval_steps", c.interval_steps(), 0, kMaxSteps);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Range("checkpoint.keep_last", c.keep_last(), 0, 1000); !s.ok()) return s;
  if (c.interval_steps() > 0 && c.dir().empty()) {
    return absl::InvalidArgumentError(
        "checkpoint.dir: required when checkpoint.interval_steps > 0");
  }
  // Validation passes (docs/training.md): 0 = off; batches 0 = the default (8).
  const v1::EvalSpec& e = spec.eval();
  if (absl::Status s = Range("eval.interval_steps", e.interval_steps(), 0, kMaxSteps); !s.ok()) {
    return s;
  }
  if (absl::Status s = Range("eval.batches", e.batches(), 0, kMaxEvalBatches); !s.ok()) return s;
  // -1: no recovery; 0: the default (3).
  if (absl::Status s = Range("max_restarts", spec.max_restarts(), -1, 1000); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace pipetrain::model
