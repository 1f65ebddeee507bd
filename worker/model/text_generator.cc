#include "worker/model/text_generator.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/kv_cache_decoder.h"

namespace pipetrain::model {
namespace {

// The distribution after `window` (1..seq_len tokens) from one forward pass over it, padded to
// seq_len.
absl::StatusOr<NextTokenDistribution> FullPass(GptChunk& model, absl::Span<const int32_t> window,
                                               bool want_probs) {
  const int64_t T = model.config().seq_len, n = static_cast<int64_t>(window.size());
  std::vector<int32_t> tokens(T, 0), targets(T, kernels::kIgnoreTarget);
  std::copy(window.begin(), window.end(), tokens.begin());
  ForwardInput in;
  in.tokens = tokens;
  in.targets = targets;
  absl::StatusOr<ForwardOutput> forward = model.Forward(/*mb=*/0, std::move(in));
  if (!forward.ok()) {
    model.Discard(0);
    return forward.status();
  }
  NextTokenDistribution out;
  out.argmax = forward->predictions[n - 1];
  if (want_probs) {
    absl::StatusOr<std::vector<float>> probs = model.OutputProbabilities(0, n - 1);
    if (!probs.ok()) {
      model.Discard(0);
      return probs.status();
    }
    out.probs = *std::move(probs);
  }
  model.Discard(0);
  return out;
}

// A draw from softmax(logits / temperature) = p^(1/T) / sum p^(1/T), in double, given the
// backend's softmax p (the argmax if every p^(1/T) underflows).
int32_t Draw(const NextTokenDistribution& next, double temperature, std::mt19937_64& rng) {
  const std::vector<float>& probs = next.probs;
  std::vector<double> w(probs.size());
  double total = 0;
  for (size_t v = 0; v < w.size(); ++v) {
    w[v] = probs[v] > 0 ? std::exp(std::log(double{probs[v]}) / temperature) : 0;
    total += w[v];
  }
  int32_t token = next.argmax;
  if (total > 0) {
    double u = std::uniform_real_distribution<double>(0.0, total)(rng);
    for (size_t v = 0; v < w.size(); ++v) {
      if (w[v] <= 0) continue;
      token = static_cast<int32_t>(v);
      if ((u -= w[v]) < 0) break;
    }
  }
  return token;
}

}  // namespace

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
  const bool sample = options.temperature > 0;
  std::unique_ptr<KvCacheDecoder> cache;
  if (options.kv_cache) {
    PT_ASSIGN_OR_RETURN(cache, KvCacheDecoder::Create(&model));
  }
  for (int i = 0; i < options.max_tokens; ++i) {
    // The window: the newest seq_len tokens, text[start, end).
    const int64_t end = static_cast<int64_t>(text.size());
    const int64_t start = std::max<int64_t>(0, end - c.seq_len);
    absl::StatusOr<NextTokenDistribution> next;
    if (cache != nullptr && start == 0) {
      // The cache holds text[0, length()): run the tokens after it.
      const int64_t cached = cache->length();
      next = cache->Append(absl::MakeConstSpan(text).subspan(cached, end - cached), sample);
    } else {
      // No cache, or a window that slid: every position changed since the last step (and does
      // again at the next), so a cache could not be reused.
      next = FullPass(model, absl::MakeConstSpan(text).subspan(start, end - start), sample);
    }
    if (!next.ok()) return next.status();
    const int32_t token = sample ? Draw(*next, options.temperature, rng) : next->argmax;
    text.push_back(token);
    generated.push_back(token);
  }
  return generated;
}

}  // namespace pipetrain::model
