#include "worker/model/transformer_block.h"

#include <cmath>

#include "common/status_macros.h"

namespace pipetrain::model {

using kernels::Tensor;

absl::StatusOr<std::unique_ptr<TransformerBlock>> TransformerBlock::Create(
    kernels::Backend* backend, const GptConfig& config, int block, uint64_t seed) {
  std::unique_ptr<TransformerBlock> b(new TransformerBlock(backend, config));
  const int layer = config.block_layer(block);
  const int64_t H = config.hidden, F = config.ffn;
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config.num_layers));
  auto make = [&](const char* name, ParameterKind kind, const kernels::Shape& shape, Init init,
                  float sd) {
    return MakeParameter(backend, seed, layer, name, kind, shape, init, sd);
  };
  constexpr ParameterKind kWeight = ParameterKind::kLinearWeight, kBias = ParameterKind::kBias,
                          kNorm = ParameterKind::kNorm;
  PT_ASSIGN_OR_RETURN(b->ln1_g_, make("ln1.gamma", kNorm, {H}, Init::kOnes, 0));
  PT_ASSIGN_OR_RETURN(b->ln1_b_, make("ln1.beta", kNorm, {H}, Init::kZeros, 0));
  PT_ASSIGN_OR_RETURN(b->qkv_w_, make("attn.qkv.weight", kWeight, {H, 3 * H}, Init::kNormal, std));
  PT_ASSIGN_OR_RETURN(b->qkv_b_, make("attn.qkv.bias", kBias, {3 * H}, Init::kZeros, 0));
  PT_ASSIGN_OR_RETURN(b->proj_w_,
                      make("attn.proj.weight", kWeight, {H, H}, Init::kNormal, proj_std));
  PT_ASSIGN_OR_RETURN(b->proj_b_, make("attn.proj.bias", kBias, {H}, Init::kZeros, 0));
  PT_ASSIGN_OR_RETURN(b->ln2_g_, make("ln2.gamma", kNorm, {H}, Init::kOnes, 0));
  PT_ASSIGN_OR_RETURN(b->ln2_b_, make("ln2.beta", kNorm, {H}, Init::kZeros, 0));
  PT_ASSIGN_OR_RETURN(b->fc_w_, make("mlp.fc.weight", kWeight, {H, F}, Init::kNormal, std));
  PT_ASSIGN_OR_RETURN(b->fc_b_, make("mlp.fc.bias", kBias, {F}, Init::kZeros, 0));
  PT_ASSIGN_OR_RETURN(b->fc2_w_, make("mlp.proj.weight", kWeight, {F, H}, Init::kNormal, proj_std));
  PT_ASSIGN_OR_RETURN(b->fc2_b_, make("mlp.proj.bias", kBias, {H}, Init::kZeros, 0));
  return b;
}

std::vector<Parameter*> TransformerBlock::params() {
  return {&ln1_g_, &ln1_b_, &qkv_w_, &qkv_b_, &proj_w_, &proj_b_,
          &ln2_g_, &ln2_b_, &fc_w_,  &fc_b_,  &fc2_w_,  &fc2_b_};
}

absl::StatusOr<Tensor> TransformerBlock::Forward(Tensor x, int64_t batch, Stash* s) {
  kernels::Backend& be = *backend_;
  const int64_t N = batch * config_.seq_len, H = config_.hidden, F = config_.ffn;
  const int64_t T = config_.seq_len, nh = config_.heads;
  if (x.numel() != N * H) return absl::InvalidArgumentError("block input has the wrong size");
  s->batch = batch;
  s->x0 = std::move(x);
  PT_ASSIGN_OR_RETURN(s->ln1, be.Empty({N, H}, "block ln1"));
  PT_ASSIGN_OR_RETURN(s->mean1, be.Empty({N}, "block mean1"));
  PT_ASSIGN_OR_RETURN(s->rstd1, be.Empty({N}, "block rstd1"));
  PT_RETURN_IF_ERROR(
      be.LayerNormForward(s->x0, ln1_g_.value, ln1_b_.value, &s->ln1, &s->mean1, &s->rstd1));
  PT_ASSIGN_OR_RETURN(s->qkv, be.Empty({N, 3 * H}, "block qkv"));
  PT_RETURN_IF_ERROR(be.Linear(s->ln1, qkv_w_.value, qkv_b_.value, nullptr, &s->qkv));
  PT_ASSIGN_OR_RETURN(s->att, be.Empty({N, H}, "block attn out"));
  PT_RETURN_IF_ERROR(be.AttentionForward(s->qkv, batch, T, nh, &s->att));
  // x1 = x0 + bo + att Wo: the residual and the bias are the GEMM's starting value.
  PT_ASSIGN_OR_RETURN(s->x1, be.Empty({N, H}, "block x1"));
  PT_RETURN_IF_ERROR(be.Linear(s->att, proj_w_.value, proj_b_.value, &s->x0, &s->x1));
  PT_ASSIGN_OR_RETURN(s->ln2, be.Empty({N, H}, "block ln2"));
  PT_ASSIGN_OR_RETURN(s->mean2, be.Empty({N}, "block mean2"));
  PT_ASSIGN_OR_RETURN(s->rstd2, be.Empty({N}, "block rstd2"));
  PT_RETURN_IF_ERROR(
      be.LayerNormForward(s->x1, ln2_g_.value, ln2_b_.value, &s->ln2, &s->mean2, &s->rstd2));
  PT_ASSIGN_OR_RETURN(s->h, be.Empty({N, F}, "block mlp h"));
  PT_RETURN_IF_ERROR(be.Linear(s->ln2, fc_w_.value, fc_b_.value, nullptr, &s->h));
  PT_ASSIGN_OR_RETURN(s->g, be.Empty({N, F}, "block mlp gelu"));
  PT_RETURN_IF_ERROR(be.GeluForward(s->h, &s->g));
  PT_ASSIGN_OR_RETURN(Tensor x2, be.Empty({N, H}, "block output"));
  PT_RETURN_IF_ERROR(be.Linear(s->g, fc2_w_.value, fc2_b_.value, &s->x1, &x2));
  return x2;
}

absl::StatusOr<Tensor> TransformerBlock::BackwardInput(Tensor dy, Stash* s) {
  kernels::Backend& be = *backend_;
  const int64_t N = s->batch * config_.seq_len, H = config_.hidden, F = config_.ffn;
  if (s->x0.empty() || s->h.empty()) {
    return absl::FailedPreconditionError("block BackwardInput without a stored forward");
  }
  if (dy.numel() != N * H) return absl::InvalidArgumentError("block output grad has wrong size");
  s->dm = std::move(dy);
  {
    PT_ASSIGN_OR_RETURN(Tensor dg, be.Empty({N, F}, "block dgelu (scratch)"));
    PT_RETURN_IF_ERROR(be.Gemm(s->dm, false, fc2_w_.value, true, 1, 0, &dg));
    PT_ASSIGN_OR_RETURN(s->dh, be.Empty({N, F}, "block dh"));
    PT_RETURN_IF_ERROR(be.GeluBackward(dg, s->h, &s->dh));
  }
  s->h.Reset();
  PT_ASSIGN_OR_RETURN(s->dln2, be.Empty({N, H}, "block dln2"));
  PT_RETURN_IF_ERROR(be.Gemm(s->dh, false, fc_w_.value, true, 1, 0, &s->dln2));
  // dx1 = LN2'(dln2) + dm: also the gradient of the attention projection output.
  PT_ASSIGN_OR_RETURN(s->dproj, be.Empty({N, H}, "block dx1"));
  PT_RETURN_IF_ERROR(be.LayerNormBackwardInput(s->dln2, s->x1, ln2_g_.value, s->mean2, s->rstd2,
                                               &s->dproj, &s->dm));
  {
    PT_ASSIGN_OR_RETURN(Tensor datt, be.Empty({N, H}, "block datt (scratch)"));
    PT_RETURN_IF_ERROR(be.Gemm(s->dproj, false, proj_w_.value, true, 1, 0, &datt));
    PT_ASSIGN_OR_RETURN(s->dqkv, be.Empty({N, 3 * H}, "block dqkv"));
    PT_RETURN_IF_ERROR(
        be.AttentionBackward(datt, s->qkv, s->batch, config_.seq_len, config_.heads, &s->dqkv));
  }
  s->qkv.Reset();
  PT_ASSIGN_OR_RETURN(s->dln1, be.Empty({N, H}, "block dln1"));
  PT_RETURN_IF_ERROR(be.Gemm(s->dqkv, false, qkv_w_.value, true, 1, 0, &s->dln1));
  PT_ASSIGN_OR_RETURN(Tensor dx0, be.Empty({N, H}, "block input grad"));
  PT_RETURN_IF_ERROR(be.LayerNormBackwardInput(s->dln1, s->x0, ln1_g_.value, s->mean1, s->rstd1,
                                               &dx0, &s->dproj));
  return dx0;
}

absl::Status TransformerBlock::BackwardWeight(Stash* s, absl::Span<Tensor* const> grads,
                                              bool accumulate) {
  kernels::Backend& be = *backend_;
  if (grads.size() != 12) return absl::InvalidArgumentError("block expects 12 gradient tensors");
  if (s->dln1.empty()) {
    return absl::FailedPreconditionError("block BackwardWeight before BackwardInput");
  }
  const float beta = accumulate ? 1.0f : 0.0f;
  PT_RETURN_IF_ERROR(be.LayerNormBackwardWeight(s->dln1, s->x0, s->mean1, s->rstd1, accumulate,
                                                grads[0], grads[1]));
  PT_RETURN_IF_ERROR(be.Gemm(s->ln1, true, s->dqkv, false, 1, beta, grads[2]));
  PT_RETURN_IF_ERROR(be.BiasGrad(s->dqkv, accumulate, grads[3]));
  PT_RETURN_IF_ERROR(be.Gemm(s->att, true, s->dproj, false, 1, beta, grads[4]));
  PT_RETURN_IF_ERROR(be.BiasGrad(s->dproj, accumulate, grads[5]));
  PT_RETURN_IF_ERROR(be.LayerNormBackwardWeight(s->dln2, s->x1, s->mean2, s->rstd2, accumulate,
                                                grads[6], grads[7]));
  PT_RETURN_IF_ERROR(be.Gemm(s->ln2, true, s->dh, false, 1, beta, grads[8]));
  PT_RETURN_IF_ERROR(be.BiasGrad(s->dh, accumulate, grads[9]));
  PT_RETURN_IF_ERROR(be.Gemm(s->g, true, s->dm, false, 1, beta, grads[10]));
  PT_RETURN_IF_ERROR(be.BiasGrad(s->dm, accumulate, grads[11]));
  s->ForEachTensor([](Tensor* t) { t->Reset(); });
  return absl::OkStatus();
}

}  // namespace pipetrain::model
