#include "model/cost_model.h"

namespace pipetrain::model {

ChunkCost EstimateChunkCost(const GptConfig& config, const ChunkSpec& spec,
                            int64_t microbatch_size, int64_t stash_element_bytes) {
  const double B = static_cast<double>(microbatch_size), T = config.seq_len;
  const double N = B * T, H = config.hidden, F = config.ffn, V = config.vocab;
  const int64_t n = microbatch_size * config.seq_len;
  const int64_t h = config.hidden, f = config.ffn, v = config.vocab;
  const int64_t f32 = 4, e = stash_element_bytes;  // stats stay f32; the rest is stashed in e
  ChunkCost c;
  const double linear = 2 * N * (4 * H * H + 2 * H * F);  // qkv, proj, fc, fc2
  const double attn = 2 * N * T * H;                      // one T x T x hd GEMM over all heads
  const int64_t params_per_block = h * 3 * h + 3 * h + h * h + h + 2 * h * f + f + h + 4 * h;
  for (int i = 0; i < spec.num_blocks; ++i) {
    c.forward_flops += linear + 2 * attn;         // + scores and probs @ v
    c.backward_input_flops += linear + 5 * attn;  // scores again, dP, dQ, dK, dV
    c.backward_input_recompute_flops += attn;
    c.backward_weight_flops += linear;
    c.activation_bytes_after_forward += e * (8 * n * h + 2 * n * f) + f32 * 4 * n;
    c.activation_bytes_after_backward_input += e * (12 * n * h + 2 * n * f) + f32 * 4 * n;
    c.parameter_bytes += f32 * params_per_block;
  }
  if (spec.has_embedding) {
    c.activation_bytes_after_backward_input += e * n * h;  // output gradient kept for W
    c.parameter_bytes += f32 * (v * h + static_cast<int64_t>(config.seq_len) * h);
  }
  if (spec.has_head) {
    c.forward_flops += 2 * N * H * V;
    c.backward_input_flops += 2 * N * H * V;
    c.backward_weight_flops += 2 * N * H * V;
    c.activation_bytes_after_forward += e * (2 * n * h + n * v) + f32 * 2 * n;
    c.activation_bytes_after_backward_input += e * (3 * n * h + n * v) + f32 * 2 * n;
    c.parameter_bytes += f32 * (2 * h + h * v);
  }
  c.output_activation_bytes = spec.has_head ? 0 : f32 * n * h;
  c.input_gradient_bytes = spec.has_embedding ? 0 : f32 * n * h;
  c.parameter_state_bytes = 4 * c.parameter_bytes;
  return c;
}

int64_t ModelParameterCount(const GptConfig& config) {
  const int64_t count = EstimateChunkCost(config, WholeModel(config), 1).parameter_bytes / 4;
  // A tied head holds a copy of the token embedding, not a parameter of its own.
  return config.tie_embeddings ? count - static_cast<int64_t>(config.vocab) * config.hidden
                               : count;
}

double TrainingStepFlops(const GptConfig& config, int64_t microbatch_size, int64_t microbatches) {
  const ChunkCost c = EstimateChunkCost(config, WholeModel(config), microbatch_size);
  return (c.forward_flops + c.backward_input_flops - c.backward_input_recompute_flops +
          c.backward_weight_flops) *
         static_cast<double>(microbatches);
}

}  // namespace pipetrain::model
