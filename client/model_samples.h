// The end of `pipetrain local`'s summary: the trained model exported from its last checkpoint
// (model_export.h) and, for the embedded addition task, a few additions it completes, sampled
// greedily by `pipetrain generate` (the pipetrain-generate binary), next to the true answers.
//
// Thread-safety: free functions.
#ifndef PIPETRAIN_CLIENT_MODEL_SAMPLES_H_
#define PIPETRAIN_CLIENT_MODEL_SAMPLES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pipetrain::client {

struct AdditionSample {
  int a = 0, b = 0;
  std::string completion;  // what the model wrote after "a+b=" (sum digits, least significant first)
  std::string answer;      // the completion read back as a number ("" if it is not digits)
  bool correct = false;
};

// `count` 2-digit additions (fixed operands, so runs compare) completed greedily by the model
// in `weights` through `generate_binary` (empty: found like the other pipetrain binaries).
absl::StatusOr<std::vector<AdditionSample>> SampleAdditions(const std::string& weights,
                                                            int count,
                                                            const std::string& generate_binary = "");

// "  17+58 = 75    model: 75  right" lines and a "k of n right" line.
std::string FormatAdditionSamples(const std::vector<AdditionSample>& samples);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_MODEL_SAMPLES_H_
