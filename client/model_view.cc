#include "client/model_view.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/cost_model.h"
#include "model/job_model.h"
#include "model/lr_schedule.h"

namespace pipetrain::client {
namespace {

// 163037184 -> "163,037,184".
std::string WithThousands(int64_t n) {
  std::string digits = absl::StrCat(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::string FormatModelLine(const v1::JobSpec& spec) {
  absl::StatusOr<model::GptConfig> c = model::ModelConfig(spec);
  if (!c.ok()) return "";
  const int64_t params = model::ModelParameterCount(*c);
  const std::string& preset = spec.model().preset();
  return absl::StrFormat(
      "model: %s%d layers x %d hidden, %d heads, ffn %d, seq %d, vocab %d%s; %s parameters "
      "(%.1fM)",
      preset.empty() ? "" : absl::StrCat(preset, ", "), c->num_layers, c->hidden, c->heads, c->ffn,
      c->seq_len, c->vocab, c->tie_embeddings ? ", tied embeddings" : "",
      WithThousands(params), static_cast<double>(params) / 1e6);
}

std::string FormatLearningRateLine(const v1::JobSpec& spec, int steps_done) {
  absl::StatusOr<model::LrSchedule> schedule = model::LrScheduleOf(spec);
  if (!schedule.ok()) return "";
  const v1::OptimizerSpec o = model::WithDefaults(spec).training().optimizer();
  std::string out = absl::StrFormat("lr: %s from %g", o.lr_schedule(), o.learning_rate());
  if (schedule->warmup_steps > 0) {
    absl::StrAppendFormat(&out, ", warmup %d", schedule->warmup_steps);
  }
  if (schedule->kind == model::LrScheduleKind::kCosine) {
    absl::StrAppendFormat(&out, ", floor %g x peak at step %d", schedule->min_lr_ratio,
                          schedule->total_steps);
  }
  const int64_t next = steps_done + 1;
  if (next <= spec.training().steps()) {
    absl::StrAppendFormat(&out, "; next t=%d: %.4g", next,
                          model::LearningRate(*schedule, o.learning_rate(), next));
  }
  return out;
}

}  // namespace pipetrain::client
