// Analytic cost of one chunk per microbatch, for the planner's cost model: FLOPs of F, B and W
// and the activation bytes the chunk holds after each (exactly what GptChunk stashes; checked
// against the counting allocator in tests/model). FLOPs count GEMMs only (2*m*n*k per GEMM,
// attention scores over the full seq_len x seq_len square as computed); elementwise work
// (layernorm, GELU, softmax, bias) is O(tokens * hidden) and left out. Attention keeps no
// seq_len x seq_len probabilities between passes: B recomputes the scores (counted in B's FLOPs,
// since it is work B does, and named apart so model-FLOP figures can leave it out).
// Thread-safety: pure functions.
#ifndef PIPETRAIN_MODEL_COST_MODEL_H_
#define PIPETRAIN_MODEL_COST_MODEL_H_

#include <cstdint>

#include "model/gpt_config.h"

namespace pipetrain::model {

struct ChunkCost {
  double forward_flops = 0;
  double backward_input_flops = 0;
  double backward_weight_flops = 0;
  // The part of backward_input_flops that recomputes F's attention scores.
  double backward_input_recompute_flops = 0;
  // Device bytes stashed for one microbatch after F, after B and after W (W frees everything).
  int64_t activation_bytes_after_forward = 0;
  int64_t activation_bytes_after_backward_input = 0;
  int64_t activation_bytes_after_backward_weight = 0;
  // Bytes sent downstream after F (0 for the last chunk) and upstream after B (0 for the first).
  int64_t output_activation_bytes = 0;
  int64_t input_gradient_bytes = 0;
  // Parameter values only, and values + gradients + AdamW moments.
  int64_t parameter_bytes = 0;
  int64_t parameter_state_bytes = 0;
};

// stash_element_bytes: 4 for an f32 job, 2 for a bf16 one (which stashes every activation but
// the LayerNorm row statistics in bf16: model/job_model.h's StashElementBytes). Transfers and
// parameters stay f32 either way.
ChunkCost EstimateChunkCost(const GptConfig& config, const ChunkSpec& spec,
                            int64_t microbatch_size, int64_t stash_element_bytes = 4);

// Trainable parameters of the whole model (the whole-model chunk's parameter bytes / 4, less
// the head's copy of the token embedding when tied): what `pipetrain plan` and `pipetrain
// status` report.
int64_t ModelParameterCount(const GptConfig& config);

// Model FLOPs of one training step: F + B + W of the whole model for `microbatches`
// microbatches of `microbatch_size` sequences, counted as above (GEMMs, per layer, attention
// over the full square) less B's recomputed attention scores: model FLOPs, not the work done.
// What the throughput metrics divide by time (docs/training.md).
double TrainingStepFlops(const GptConfig& config, int64_t microbatch_size, int64_t microbatches);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_COST_MODEL_H_
