#include "worker/model/text_generator.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::model {

absl::StatusOr<std::vector<int32_t>> GenerateTokens(GptChunk& model,
                                                    absl::Span<const int32_t> prompt,
                                                    const GenerationOptions& options) {
  const GptConfig& c = model.config();
  if (!model.spec().has_embedding || !model.spec().has_head ||
      model.spec().num_blocks != c.num_layers) {
    return absl::InvalidArgumentError("generation needs the whole model in one chunk");
  }
  if (options.max_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-tokens: ", options.max_tokens, " is not allowed; allowed: >= 0"));
  }
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--temperature: ", options.temperature, " is not allowed; allowed: >= 0 (0: greedy)"));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("--prompt: gives no tokens");
  for (int32_t id : prompt) {
    if (id < 0 || id >= c.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt: token ", id, " is outside the model's vocabulary 0..", c.vocab - 1));
    }
  }
  std::vector<int32_t> text(prompt.begin(), prompt.end());
  std::vector<int32_t> generated;
  std::mt19937_64 rng(options.seed);
  const int64_t T = c.seq_len;
  for (int i = 0; i < options.max_tokens; ++i) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(text.size()) - T);
    const int64_t n = static_cast<int64_t>(text.size()) - start;  // real positions, 1..T
    std::vector<int32_t> tokens(T, 0), targets(T, kernels::kIgnoreTarget);
    for (int64_t j = 0; j < n; ++j) tokens[j] = text[start + j];
    ForwardInput in;
    in.tokens = tokens;
    in.targets = targets;
    auto forward = model.Forward(/*mb=*/0, std::move(in));
    if (!forward.ok()) {
      model.Discard(0);
      return forward.status();
    }
    int32_t next = forward->predictions[n - 1];
    if (options.temperature > 0) {
      absl::StatusOr<std::vector<float>> probs = model.OutputProbabilities(0, n - 1);
      if (!probs.ok()) {
        model.Discard(0);
        return probs.status();
      }
      // softmax(logits / T) = p^(1/T) / sum p^(1/T), in double.
      std::vector<double> w(probs->size());
      double total = 0;
      for (size_t v = 0; v < w.size(); ++v) {
        w[v] = (*probs)[v] > 0 ? std::exp(std::log(double{(*probs)[v]}) / options.temperature) : 0;
        total += w[v];
      }
      if (total > 0) {
        double u = std::uniform_real_distribution<double>(0.0, total)(rng);
        for (size_t v = 0; v < w.size(); ++v) {
          if (w[v] <= 0) continue;
          next = static_cast<int32_t>(v);
          if ((u -= w[v]) < 0) break;
        }
      }
    }
    model.Discard(0);
    text.push_back(next);
    generated.push_back(next);
  }
  return generated;
}

}  // namespace pipetrain::model
