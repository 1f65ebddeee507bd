// GptConfig: the shape of a decoder-only (GPT-2 style, pre-layernorm) transformer, and ChunkSpec:
// which contiguous part of it one pipeline chunk holds. Global layer indices (used for
// deterministic initialisation): 0 = embedding (token + learned position), 1..num_layers =
// transformer blocks, num_layers + 1 = head (final layernorm + LM head + loss).
// Thread-safety: plain values.
#ifndef PIPETRAIN_MODEL_GPT_CONFIG_H_
#define PIPETRAIN_MODEL_GPT_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pipetrain::model {

struct GptConfig {
  int num_layers = 2;
  int hidden = 64;
  int heads = 4;
  int ffn = 256;
  int seq_len = 16;
  int vocab = 16;
  // The LM head's weight is the token embedding (wte, [vocab, hidden]) (docs/training.md).
  bool tie_embeddings = false;

  // InvalidArgument naming the field unless all are positive and hidden % heads == 0.
  absl::Status Validate() const;
  int embedding_layer() const { return 0; }
  int block_layer(int block) const { return 1 + block; }
  int head_layer() const { return num_layers + 1; }
  std::string DebugString() const;
};

struct ChunkSpec {
  int first_block = 0;  // index of the first transformer block (0-based)
  int num_blocks = 0;   // may be 0 (e.g. an embedding-only or head-only chunk)
  bool has_embedding = false;
  bool has_head = false;

  int end_block() const { return first_block + num_blocks; }
  std::string DebugString() const;
};

// The whole model as one chunk.
ChunkSpec WholeModel(const GptConfig& config);
// InvalidArgument unless the blocks lie in [0, num_layers) and the chunk holds something.
absl::Status ValidateChunkSpec(const GptConfig& config, const ChunkSpec& spec);
// Splits the blocks into `num_chunks` contiguous ranges whose sizes differ by at most one (the
// earlier chunks get the extra blocks); chunk 0 holds the embedding, the last the head.
absl::StatusOr<std::vector<ChunkSpec>> SplitEvenly(const GptConfig& config, int num_chunks);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_GPT_CONFIG_H_
