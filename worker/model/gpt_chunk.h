// GptChunk: the unit of pipeline-parallel compute. It holds a contiguous range of transformer
// blocks (ChunkSpec) of a GptConfig model; the first chunk also holds the embedding, the last the
// final layernorm + LM head + loss. It runs, per microbatch index:
//   F  Forward(mb, in)        first chunk: token ids; other chunks: the previous chunk's output
//                             activation [batch*seq_len, hidden]; last chunk: + targets, returns
//                             the loss (scaled by in.loss_scale in the backward pass).
//   B  BackwardInput(mb, dy)  input gradient (returned; empty for the first chunk); keeps what W
//                             needs (inputs of weighted ops and their output gradients).
//   W  BackwardWeight(mb)     accumulates this microbatch's weight gradients, frees its stash.
//   BW Backward(mb, dy)       B then W (bitwise the same gradients as B followed by W).
// Several microbatches may be in flight in any order; each has its own stash (keyed by mb).
// Everything stashed is allocated from the backend's counting device allocator, so
// ActivationBytes() and the allocator's counters are the real bytes held (between passes, in
// bf16 for a ChunkOptions::stash_bf16 chunk). A memory manager can
// move a microbatch's stash to host memory and back with Offload(mb)/Reload(mb) (F/B/W on an
// offloaded microbatch fail with FailedPrecondition).
//
// Gradient accumulation (GradAccumulation):
//   kMicrobatchOrdered (default): W(mb) computes the microbatch's gradients into scratch tensors
//     and adds them into Parameter::grad strictly in microbatch order 0, 1, 2, ... (a W that
//     runs early is buffered until its predecessors have been added). Gradients, and therefore
//     weights after OptimizerStep, are bitwise identical for ANY order of W calls, e.g. the
//     reference trainer's in-order W and a zero-bubble schedule's reordered W. Microbatch
//     indices must be 0..M-1 in each step (between ZeroGrad and OptimizerStep).
//   kDirect: W adds straight into Parameter::grad (GEMM with beta = 1) in call order; no scratch,
//     but a different W order changes rounding (expect ~1e-6 relative differences).
// Thread-safety: not thread-safe. One thread drives a chunk (the worker's executor).
#ifndef PIPETRAIN_WORKER_MODEL_GPT_CHUNK_H_
#define PIPETRAIN_WORKER_MODEL_GPT_CHUNK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "model/gpt_config.h"
#include "worker/model/embedding_layer.h"
#include "worker/model/lm_head.h"
#include "worker/model/optimizer_settings.h"
#include "worker/model/parameter.h"
#include "worker/model/transformer_block.h"

namespace pipetrain::model {

enum class GradAccumulation { kMicrobatchOrdered, kDirect };

struct ChunkOptions {
  uint64_t seed = 1234;  // initialisation seed (same on every chunk of a model)
  GradAccumulation grad_accumulation = GradAccumulation::kMicrobatchOrdered;
  // A bf16 job's stash: between passes every stashed activation and gradient is held in bf16
  // (half the bytes; the [N] LayerNorm statistics stay f32). Each pass widens what it reads to
  // f32 first, computes in f32 and narrows what it leaves, so B then W and BW round the same
  // values: the schedule still does not change the result.
  bool stash_bf16 = false;
};

struct ForwardInput {
  absl::Span<const int32_t> tokens;   // has_embedding: batch*seq_len token ids
  kernels::Tensor activation;         // otherwise: previous chunk's output (moved in; stashed)
  absl::Span<const int32_t> targets;  // has_head: batch*seq_len targets (kIgnoreTarget = none)
  float loss_scale = 1.0f;            // has_head: gradient scale, 1/M for M microbatches
};

struct ForwardOutput {
  kernels::Tensor activation;  // !has_head: [batch*seq_len, hidden], owned by the caller
  // has_head only:
  double loss = 0;  // mean token cross-entropy of this microbatch (NOT multiplied by loss_scale)
  int64_t valid_targets = 0;
  std::vector<int32_t> predictions;  // argmax token per position
};

// Where a microbatch is in its life on this chunk.
enum class MicrobatchPhase { kNone, kForwardDone, kBackwardInputDone };

class GptChunk {
 public:
  static absl::StatusOr<std::unique_ptr<GptChunk>> Create(kernels::Backend* backend,
                                                          const GptConfig& config,
                                                          const ChunkSpec& spec,
                                                          const ChunkOptions& options = {});

  // ---- Compute actions (see the file comment) ----
  absl::StatusOr<ForwardOutput> Forward(int mb, ForwardInput in);
  // grad_output: dL/d(output) from the next chunk; must be empty for the last chunk (the loss
  // is the root). Returns dL/d(input), or an empty tensor for the first chunk.
  absl::StatusOr<kernels::Tensor> BackwardInput(int mb, kernels::Tensor grad_output);
  absl::Status BackwardWeight(int mb);
  absl::StatusOr<kernels::Tensor> Backward(int mb, kernels::Tensor grad_output);

  // ---- Activation memory ----
  MicrobatchPhase phase(int mb) const;
  // Microbatches with a stash (after F, before W), ascending.
  std::vector<int> InFlightMicrobatches() const;
  // Bytes of mb's stash currently in device memory (0 when offloaded or not in flight).
  int64_t ActivationBytes(int mb) const;
  // Bytes of mb's stash currently in host memory.
  int64_t OffloadedBytes(int mb) const;
  // Sum of ActivationBytes over all in-flight microbatches.
  int64_t TotalActivationBytes() const;
  // Moves every stashed tensor of mb to host memory (host allocator) and frees the device copy;
  // Reload moves them back. NotFound if mb is not in flight; FailedPrecondition if already
  // offloaded / not offloaded.
  absl::Status Offload(int mb);
  absl::Status Reload(int mb);
  bool IsOffloaded(int mb) const;
  // Calls fn on every non-empty stashed tensor of mb (for custom memory managers).
  absl::Status ForEachStashedTensor(int mb, const std::function<void(kernels::Tensor*)>& fn);
  // Drops mb's stash without computing gradients (aborted step, evaluation-only forward).
  void Discard(int mb);
  // Last chunk only, between F and B of mb: the softmax over the vocabulary at position `row`
  // (0..batch*seq_len-1) of that forward pass (what sampling from the model draws from).
  absl::StatusOr<std::vector<float>> OutputProbabilities(int mb, int64_t row);

  // ---- Parameters and optimizer ----
  // Embedding (if any), blocks in order, head (if any); each layer's params in a fixed order.
  std::vector<Parameter*> parameters();
  // Zeroes gradients and restarts the ordered-accumulation cursor at microbatch 0.
  absl::Status ZeroGrad();
  // Whether every accumulated gradient is finite (no NaN or Inf): a step whose gradients are not
  // must not update (the caller skips OptimizerStep). FailedPrecondition if ordered W results
  // are still buffered.
  absl::StatusOr<bool> GradientsFinite();
  // Per parameter (parameters() order), the sum of its squared gradient elements
  // (Backend::SumOfSquares): the terms of the global gradient norm (gradient_clipping.h). A
  // tied head's copy of the token embedding contributes 0 (the embedding counts the matrix
  // once). FailedPrecondition if ordered W results are still buffered.
  absl::StatusOr<std::vector<double>> GradientSquares();
  // Tied embeddings (GptConfig::tie_embeddings): the token embedding (wte) if this chunk holds
  // the embedding, and the head's copy of it if this chunk holds the head; null otherwise. The
  // two are one matrix: every step both take the sum of their gradients (wte's + the head's;
  // TieGradients when one chunk holds both, the stage runner otherwise) and then the same
  // AdamW update, so their values and moments stay bitwise equal.
  Parameter* tied_embedding();
  Parameter* tied_head_copy();
  // Both in this chunk: each gradient becomes their sum. Nothing otherwise.
  absl::Status TieGradients();
  // Data parallelism (worker/runtime/replica_reducer.h). Every gradient, parameters() order,
  // as one vector. FailedPrecondition if ordered W results are still buffered.
  absl::StatusOr<std::vector<float>> FlatGradients();
  // Ordered accumulation continued from a sum computed elsewhere: every gradient becomes its
  // slice of `flat` (the sum over microbatches 0..next_microbatch-1, in order, as FlatGradients
  // gives it), the cursor moves to `next_microbatch` and the buffered W results from there on
  // are added in order. So a replica whose microbatches follow another's continues that
  // replica's running sum exactly as one chunk doing all of them would. InvalidArgument if the
  // size is wrong; FailedPrecondition if a buffered microbatch lies below next_microbatch.
  absl::Status ResumeGradientsAt(absl::Span<const float> flat, int next_microbatch);
  // Multiplies every gradient by `scale` (gradient clipping).
  absl::Status ScaleGradients(float scale);
  // Copies every parameter's value and AdamW moments into `copy` (allocated on first use, from
  // the device allocator, and reused), and back: the rollback of an optimizer step taken before
  // its verdict was known (worker/runtime/executor.h).
  absl::Status SaveOptimizerState(std::vector<kernels::Tensor>* copy);
  absl::Status RestoreOptimizerState(const std::vector<kernels::Tensor>& copy);
  // AdamW step `step` (>= 1) on every parameter, at the schedule's learning rate for `step` and
  // with weight decay on the parameters of the decayed groups (optimizer_settings.h).
  // FailedPrecondition if ordered W results are still buffered.
  absl::Status OptimizerStep(const OptimizerSettings& settings, int64_t step);
  // The same with a constant learning rate (config.lr) and the default decay groups.
  absl::Status OptimizerStep(const kernels::AdamWConfig& config, int64_t step);
  // Bytes of values + grads + AdamW moments.
  int64_t ParameterStateBytes();

  const GptConfig& config() const { return config_; }
  const ChunkSpec& spec() const { return spec_; }
  kernels::Backend* backend() const { return backend_; }

 private:
  struct MicrobatchState {
    MicrobatchPhase phase = MicrobatchPhase::kNone;
    bool offloaded = false;
    EmbeddingLayer::Stash embed;
    std::vector<TransformerBlock::Stash> blocks;
    LmHead::Stash head;
    void ForEachTensor(const std::function<void(kernels::Tensor*)>& fn);
  };

  GptChunk(kernels::Backend* backend, const GptConfig& config, const ChunkSpec& spec,
           const ChunkOptions& options)
      : backend_(backend), config_(config), spec_(spec), options_(options) {}
  absl::StatusOr<MicrobatchState*> Find(int mb, MicrobatchPhase want, const char* action);
  // Runs every layer's W for mb, writing into `grads` (parameters() order).
  absl::Status RunWeightGrads(MicrobatchState* st, const std::vector<kernels::Tensor*>& grads,
                              bool accumulate);
  absl::Status DrainOrderedGrads();
  // stash_bf16: narrows every f32 stashed tensor of rank >= 2 to bf16 / widens every bf16 one.
  absl::Status NarrowStash(MicrobatchState* st);
  absl::Status WidenStash(MicrobatchState* st);
  // FailedPrecondition naming `op` while ordered W results wait for an earlier microbatch.
  absl::Status CheckNoBufferedGrads(const char* op) const;

  kernels::Backend* backend_;
  GptConfig config_;
  ChunkSpec spec_;
  ChunkOptions options_;
  std::unique_ptr<EmbeddingLayer> embedding_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  std::unique_ptr<LmHead> head_;
  std::map<int, std::unique_ptr<MicrobatchState>> states_;
  // kMicrobatchOrdered: per-microbatch weight gradients waiting for their turn.
  std::map<int, std::vector<kernels::Tensor>> pending_grads_;
  int next_grad_mb_ = 0;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_GPT_CHUNK_H_
