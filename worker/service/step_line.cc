#include "worker/service/step_line.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace pipetrain::worker {

std::string FormatStepLine(const StepLine& l) {
  return absl::StrFormat(
      "rank %d step %d loss %s time_ms %.1f peak_activation_bytes %d sent_bytes %d%s%s", l.rank,
      l.step, l.loss, l.time_ms, l.peak_activation_bytes, l.sent_bytes,
      l.checkpoint_step > 0 ? absl::StrFormat(" checkpoint_step %d", l.checkpoint_step) : "",
      l.val_loss.empty() ? "" : absl::StrCat(" val_loss ", l.val_loss));
}

std::optional<StepLine> ParseStepLine(absl::string_view text) {
  const std::vector<absl::string_view> f = absl::StrSplit(text, ' ', absl::SkipEmpty());
  if (f.size() < 12 || f.size() % 2 != 0) return std::nullopt;
  const char* keys[] = {"rank", "step", "loss", "time_ms", "peak_activation_bytes", "sent_bytes"};
  for (size_t i = 0; i < 6; ++i) {
    if (f[2 * i] != keys[i]) return std::nullopt;
  }
  StepLine l;
  l.loss = std::string(f[5]);
  if (!absl::SimpleAtoi(f[1], &l.rank) || !absl::SimpleAtoi(f[3], &l.step) ||
      !absl::SimpleAtod(f[7], &l.time_ms) || !absl::SimpleAtoi(f[9], &l.peak_activation_bytes) ||
      !absl::SimpleAtoi(f[11], &l.sent_bytes)) {
    return std::nullopt;
  }
  for (size_t i = 12; i < f.size(); i += 2) {  // the optional pairs
    if (f[i] == "checkpoint_step") {
      if (!absl::SimpleAtoi(f[i + 1], &l.checkpoint_step)) return std::nullopt;
    } else if (f[i] == "val_loss") {
      l.val_loss = std::string(f[i + 1]);
    } else {
      return std::nullopt;
    }
  }
  return l;
}

std::map<int, StepLine> ParseStepLines(absl::string_view output) {
  std::map<int, StepLine> steps;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    if (std::optional<StepLine> l = ParseStepLine(line)) steps[l->step] = *std::move(l);
  }
  return steps;
}

}  // namespace pipetrain::worker
