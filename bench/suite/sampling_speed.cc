// Sampling speed (`pipetrain generate`, worker/model/text_generator.h): tokens/s of greedy
// generation with the KV cache against a full forward pass per token, on a randomly initialised
// model of gpt2-small's shape (12 layers, hidden 768, 12 heads, seq_len 1024, vocabulary 50257,
// tied embeddings: GPT-2's 124M parameters), CPU backend, one process. Both runs start from the
// same prompt; the tokens they share are compared.
#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite/suite.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/model/gpt_chunk.h"
#include "worker/model/text_generator.h"

namespace pipetrain::bench {
namespace {

struct Timed {
  std::vector<int32_t> tokens;
  double seconds = 0;
  std::string error;
};

Timed Generate(model::GptChunk& chunk, const std::vector<int32_t>& prompt, int tokens,
               bool kv_cache) {
  model::GenerationOptions options;
  options.max_tokens = tokens;
  options.kv_cache = kv_cache;
  Timed t;
  const auto start = std::chrono::steady_clock::now();
  auto out = model::GenerateTokens(chunk, prompt, options);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!out.ok()) {
    t.error = std::string(out.status().message());
  } else {
    t.tokens = *std::move(out);
  }
  return t;
}

}  // namespace

Section SamplingSpeed(const SuiteOptions& options) {
  const Stamp start = Now();
  model::GptConfig config{12, 768, 12, 3072, 1024, 50257, /*tie_embeddings=*/true};
  std::string shape = "one of gpt2-small's shape (12 layers, hidden 768, 12 heads, ffn 3072, seq_len "
                      "1024, vocabulary 50257, tied embeddings; 124M parameters)";
  int cached_tokens = 64, uncached_tokens = 3;
  if (options.quick) {
    config = {2, 64, 4, 256, 64, 512, true};
    shape = "a tiny one (quick mode: 2 layers, hidden 64, seq_len 64, vocabulary 512)";
    cached_tokens = 16;
    uncached_tokens = 4;
  }
  const std::vector<int32_t> prompt = {464, 11523, 318, 257, 3047, 286, 262, 2746};  // 8 ids
  std::vector<int32_t> p = prompt;
  for (int32_t& id : p) id %= config.vocab;

  kernels::CpuBackend backend;
  model::ChunkOptions chunk_options;
  chunk_options.seed = 2026;
  auto chunk = model::GptChunk::Create(&backend, config, model::WholeModel(config), chunk_options);
  Section section;
  if (!chunk.ok()) {
    section.markdown = absl::StrCat("## Sampling speed: the KV cache\n\nFailed: ",
                                    chunk.status().message(), "\n\n");
    return section;
  }
  std::string table =
      "| run | KV cache | tokens | seconds | tokens/s |\n|---|---|---|---|---|\n";
  double cached_rate = 0, uncached_rate = 0;
  std::vector<double> ratios;
  bool same = true;
  std::string error;
  for (int r = 0; r < options.repeats && error.empty(); ++r) {
    const Timed full = Generate(**chunk, p, uncached_tokens, false);
    const Timed cached = Generate(**chunk, p, cached_tokens, true);
    if (!full.error.empty() || !cached.error.empty()) {
      error = full.error + cached.error;
      break;
    }
    for (size_t i = 0; i < full.tokens.size(); ++i) same = same && full.tokens[i] == cached.tokens[i];
    uncached_rate = uncached_tokens / full.seconds;
    cached_rate = cached_tokens / cached.seconds;
    ratios.push_back(cached_rate / uncached_rate);
    absl::StrAppendFormat(&table, "| %d | no | %d | %.3g | %.3g |\n", r + 1, uncached_tokens,
                          full.seconds, uncached_rate);
    absl::StrAppendFormat(&table, "| %d | yes | %d | %.3g | %.3g |\n", r + 1, cached_tokens,
                          cached.seconds, cached_rate);
  }
  const Stamp end = Now();
  std::string ratio_text;
  for (double x : ratios) ratio_text += absl::StrFormat("%s%.0fx", ratio_text.empty() ? "" : ", ", x);
  section.markdown = absl::StrCat(
      "## Sampling speed: the KV cache\n\n", Provenance(options, start, end),
      "Greedy generation (`model::GenerateTokens`, what `pipetrain generate` runs) from an "
      "8-token prompt on a randomly initialised model, ", shape,
      ", CPU backend, one process. Without the cache every new token is a full forward pass "
      "over the window padded to seq_len (the LM head and softmax included, on every row); with "
      "it the prompt runs once and each token is one row through every layer, attending to the "
      "cached keys and values. Runs alternate (uncached, then cached) within each repetition; "
      "the box is shared and noisy, so compare within a row pair.\n\n",
      error.empty() ? table : absl::StrCat("Failed: ", error, "\n"), "\n",
      error.empty() ? absl::StrCat("Cached / uncached tokens/s per repetition: ", ratio_text,
                                   ". The first ", uncached_tokens, " tokens of both runs are ",
                                   same ? "identical" : "**different**", ".\n\n")
                    : "\n");
  return section;
}

}  // namespace pipetrain::bench
