// KvCacheDecoder: incremental forward passes of a whole-model GptChunk for sampling
// (text_generator.h). It keeps every block's keys and values of the tokens seen so far (the
// "KV cache", host memory: layers x seq_len x hidden x 2 floats), so extending the text by one
// token costs one row through every GEMM instead of a full seq_len-row forward pass.
//
// The arithmetic is the chunk's forward pass restricted to the new rows, op for op on the same
// backend (LayerNorm, GEMM + bias, GELU, residual adds, the LM head's softmax through
// CrossEntropyForward); only the attention of the new rows over the cache is computed here, on
// the host, in the CPU backend's order (scaled dot products, max-subtracted float softmax, then
// the probability-weighted sum of values). The logits therefore agree with a full forward pass to
// float rounding (GEMMs of one row and of seq_len rows may round differently), not bitwise.
//
// Positions are absolute from the first appended token, so the cache holds at most seq_len
// tokens (the learned position table has no more rows); Clear starts over at position 0. A
// window that slides changes every position, so the generator falls back to full passes then.
//
// Thread-safety: not thread-safe (drives the chunk's backend).
#ifndef PIPETRAIN_WORKER_MODEL_KV_CACHE_DECODER_H_
#define PIPETRAIN_WORKER_MODEL_KV_CACHE_DECODER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain::model {

// The model's output at the newest position.
struct NextTokenDistribution {
  int32_t argmax = 0;         // first index of the largest logit
  std::vector<float> probs;   // softmax over the vocabulary (empty unless asked for)
};

class KvCacheDecoder {
 public:
  // `model` must hold the whole model (embedding, every block, head) and outlive the decoder.
  static absl::StatusOr<std::unique_ptr<KvCacheDecoder>> Create(GptChunk* model);

  // Runs `tokens` (>= 1 ids, each below the vocabulary) at positions length() ..
  // length() + tokens.size() - 1, appends their keys and values to the cache and returns the
  // distribution after the last of them (with probabilities when `want_probs`).
  // InvalidArgument when the cache would exceed seq_len tokens or an id is out of range.
  absl::StatusOr<NextTokenDistribution> Append(absl::Span<const int32_t> tokens, bool want_probs);

  // Forgets every cached token (the next Append starts at position 0).
  void Clear() { length_ = 0; }
  // Tokens in the cache.
  int64_t length() const { return length_; }

 private:
  // The weights of one block, in TransformerBlock::params() order.
  struct BlockWeights {
    Parameter *ln1_g, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_g, *ln2_b, *fc_w, *fc_b,
        *fc2_w, *fc2_b;
  };

  explicit KvCacheDecoder(GptChunk* model) : model_(model) {}
  // x [k, H] for the rows at positions pos..pos+k-1 through block `b`; appends their K and V.
  absl::StatusOr<kernels::Tensor> Block(int b, kernels::Tensor x, int64_t pos);
  // Stores the new rows' keys and values (qkv [k, 3H], host) at positions pos..pos+k-1 of block
  // b's cache, then writes their attention output [k, H] over cache rows 0..pos+k-1.
  void Attend(int b, const std::vector<float>& qkv, int64_t k, int64_t pos,
              std::vector<float>* out);

  GptChunk* model_;
  Parameter *wte_ = nullptr, *wpe_ = nullptr;
  std::vector<BlockWeights> blocks_;
  Parameter *lnf_g_ = nullptr, *lnf_b_ = nullptr, *head_w_ = nullptr;
  // Per block: keys and values [seq_len, H] of the cached positions (row = position).
  std::vector<std::vector<float>> keys_, values_;
  int64_t length_ = 0;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_KV_CACHE_DECODER_H_
