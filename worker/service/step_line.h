// The line `pipetrain-worker --plan` prints after every step, and its parser (for the
// end-to-end tests and benchmarks that run workers as processes):
//   rank R step S loss L time_ms T peak_activation_bytes B sent_bytes N [checkpoint_step C]
//   [val_loss V]
// val_loss: a validation pass ran after the step (eval.interval_steps). The losses are printed with 17 significant digits (or "null" on ranks without the head), so
// comparing the text compares the bits.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_WORKER_SERVICE_STEP_LINE_H_
#define PIPETRAIN_WORKER_SERVICE_STEP_LINE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace pipetrain::worker {

struct StepLine {
  int rank = 0;
  int step = 0;
  std::string loss;  // as printed
  double time_ms = 0;
  int64_t peak_activation_bytes = 0;
  int64_t sent_bytes = 0;
  int64_t checkpoint_step = 0;  // 0: the step wrote no checkpoint
  std::string val_loss;         // as printed; empty: no validation pass after the step
};

std::string FormatStepLine(const StepLine& line);
// nullopt for a line that is not a step line.
std::optional<StepLine> ParseStepLine(absl::string_view line);
// The step lines of a worker's output, by step (other lines are skipped).
std::map<int, StepLine> ParseStepLines(absl::string_view output);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_STEP_LINE_H_
