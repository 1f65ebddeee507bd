// Sampling from a trained model (`pipetrain generate`, docs/export.md): extends a prompt one
// token at a time with forward passes of a whole-model GptChunk. Each step runs the model on
// the newest seq_len tokens (the learned position table has no more rows; the causal mask makes
// the padding after them irrelevant) and picks the next token from the distribution at the last
// real position: its argmax at temperature 0 (exactly the forward pass's prediction, first index
// on ties), else a draw from softmax(logits / T) with a generator seeded by `seed`, so a
// (model, prompt, options) triple always gives the same tokens.
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
};

// The `options.max_tokens` tokens that follow `prompt` (at least one id, each below the
// vocabulary). `model` must hold the whole model (embedding and head). InvalidArgument naming
// the bad option or id.
absl::StatusOr<std::vector<int32_t>> GenerateTokens(GptChunk& model,
                                                    absl::Span<const int32_t> prompt,
                                                    const GenerationOptions& options);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_TEXT_GENERATOR_H_
