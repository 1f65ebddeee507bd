// Sampling from a trained model (`pipetrain generate`, docs/export.md): extends a prompt one
// token at a time with a whole-model GptChunk. Each step conditions on the newest seq_len tokens
// (the learned position table has no more rows) and picks the next token from the distribution
// at the last position: its argmax at temperature 0 (first index on ties), else a draw from
// softmax(logits / T) with a generator seeded by `seed`, so a (model, prompt, options) triple
// always gives the same tokens.
//
// With the KV cache (the default; kv_cache_decoder.h) the prompt is run once and every further
// token costs one row through the model, while the text fits in seq_len. Once it is longer,
// every step's window starts one token later and all its positions change, so no cache can be
// reused: each step is then a full pass, as without the cache. Without the cache every step is
// one full forward pass over the window padded to seq_len (the causal mask makes the padding
// irrelevant). Both pick from the same backend softmax of logits that agree to float
// rounding, so they give the same tokens unless two candidates are within rounding of each other
// (tests/export/generate_test.cc checks they agree).
//
// Thread-safety: not thread-safe (drives the chunk).
#ifndef PIPETRAIN_WORKER_MODEL_TEXT_GENERATOR_H_
#define PIPETRAIN_WORKER_MODEL_TEXT_GENERATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain::model {

struct GenerationOptions {
  int max_tokens = 32;       // tokens to add, >= 0
  double temperature = 0.0;  // 0: greedy; > 0: sample from softmax(logits / temperature)
  uint64_t seed = 0;         // the sampler's seed (temperature > 0)
  bool kv_cache = true;      // false: a full forward pass per token (the reference; benchmarks)
};

// The `options.max_tokens` tokens that follow `prompt` (at least one id, each below the
// vocabulary). `model` must hold the whole model (embedding and head). InvalidArgument naming
// the bad option or id.
absl::StatusOr<std::vector<int32_t>> GenerateTokens(GptChunk& model,
                                                    absl::Span<const int32_t> prompt,
                                                    const GenerationOptions& options);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_TEXT_GENERATOR_H_
