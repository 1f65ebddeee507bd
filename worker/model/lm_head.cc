#include "worker/model/lm_head.h"

#include "common/status_macros.h"

namespace pipetrain::model {

using kernels::Tensor;

absl::StatusOr<std::unique_ptr<LmHead>> LmHead::Create(kernels::Backend* backend,
                                                       const GptConfig& config, uint64_t seed) {
  std::unique_ptr<LmHead> h(new LmHead(backend, config));
  const int layer = config.head_layer();
  const int64_t H = config.hidden;
  PT_ASSIGN_OR_RETURN(h->lnf_g_, MakeParameter(backend, seed, layer, "lnf.gamma",
                                               ParameterKind::kNorm, {H}, Init::kOnes));
  PT_ASSIGN_OR_RETURN(h->lnf_b_, MakeParameter(backend, seed, layer, "lnf.beta",
                                               ParameterKind::kNorm, {H}, Init::kZeros));
  if (config.tie_embeddings) {
    // Bitwise the embedding's wte: the same key, kind, shape and scale (embedding_layer.cc).
    PT_ASSIGN_OR_RETURN(
        h->w_, MakeParameter(backend, seed, config.embedding_layer(), "wte",
                             ParameterKind::kEmbedding, {config.vocab, H}, Init::kNormal, 0.02f));
  } else {
    PT_ASSIGN_OR_RETURN(
        h->w_, MakeParameter(backend, seed, layer, "lm_head.weight", ParameterKind::kLinearWeight,
                             {H, config.vocab}, Init::kNormal, 0.02f));
  }
  return h;
}

absl::StatusOr<LmHead::Output> LmHead::Forward(Tensor x, absl::Span<const int32_t> targets,
                                               float loss_scale, Stash* s) {
  kernels::Backend& be = *backend_;
  const int64_t N = static_cast<int64_t>(targets.size()), H = config_.hidden;
  if (x.numel() != N * H) {
    return absl::InvalidArgumentError("head input does not match the number of targets");
  }
  s->x = std::move(x);
  s->targets.assign(targets.begin(), targets.end());
  s->loss_scale = loss_scale;
  PT_ASSIGN_OR_RETURN(s->lnf, be.Empty({N, H}, "head lnf"));
  PT_ASSIGN_OR_RETURN(s->mean, be.Empty({N}, "head mean"));
  PT_ASSIGN_OR_RETURN(s->rstd, be.Empty({N}, "head rstd"));
  PT_RETURN_IF_ERROR(
      be.LayerNormForward(s->x, lnf_g_.value, lnf_b_.value, &s->lnf, &s->mean, &s->rstd));
  PT_ASSIGN_OR_RETURN(s->probs, be.Empty({N, config_.vocab}, "head probs"));
  // Logits are scratch: only the probabilities are kept for B.
  PT_ASSIGN_OR_RETURN(Tensor logits, be.Empty({N, config_.vocab}, "head logits (scratch)"));
  PT_RETURN_IF_ERROR(be.Gemm(s->lnf, false, w_.value, config_.tie_embeddings, 1, 0, &logits));
  PT_ASSIGN_OR_RETURN(auto ce, be.CrossEntropyForward(logits, s->targets, &s->probs));
  Output out;
  out.loss = ce.loss;
  out.valid_targets = ce.valid_targets;
  out.predictions = std::move(ce.predictions);
  return out;
}

absl::StatusOr<Tensor> LmHead::BackwardInput(Stash* s) {
  kernels::Backend& be = *backend_;
  if (s->probs.empty()) return absl::FailedPreconditionError("head B without a stored forward");
  const int64_t N = static_cast<int64_t>(s->targets.size()), H = config_.hidden;
  PT_ASSIGN_OR_RETURN(s->dlogits, be.Empty({N, config_.vocab}, "head dlogits"));
  PT_RETURN_IF_ERROR(be.CrossEntropyBackward(s->probs, s->targets, s->loss_scale, &s->dlogits));
  s->probs.Reset();
  PT_ASSIGN_OR_RETURN(s->dlnf, be.Empty({N, H}, "head dlnf"));
  PT_RETURN_IF_ERROR(
      be.Gemm(s->dlogits, false, w_.value, !config_.tie_embeddings, 1, 0, &s->dlnf));
  PT_ASSIGN_OR_RETURN(Tensor dx, be.Empty({N, H}, "head input grad"));
  PT_RETURN_IF_ERROR(be.LayerNormBackwardInput(s->dlnf, s->x, lnf_g_.value, s->mean, s->rstd, &dx));
  return dx;
}

absl::Status LmHead::BackwardWeight(Stash* s, absl::Span<Tensor* const> grads, bool accumulate) {
  kernels::Backend& be = *backend_;
  if (grads.size() != 3) return absl::InvalidArgumentError("head expects 3 gradients");
  if (s->dlnf.empty()) return absl::FailedPreconditionError("head W before B");
  PT_RETURN_IF_ERROR(
      be.LayerNormBackwardWeight(s->dlnf, s->x, s->mean, s->rstd, accumulate, grads[0], grads[1]));
  if (config_.tie_embeddings) {  // dwte [vocab, hidden] = dlogits^T lnf
    PT_RETURN_IF_ERROR(
        be.Gemm(s->dlogits, true, s->lnf, false, 1, accumulate ? 1.0f : 0.0f, grads[2]));
  } else {  // dW [hidden, vocab] = lnf^T dlogits
    PT_RETURN_IF_ERROR(
        be.Gemm(s->lnf, true, s->dlogits, false, 1, accumulate ? 1.0f : 0.0f, grads[2]));
  }
  s->ForEachTensor([](Tensor* t) { t->Reset(); });
  s->targets.clear();
  return absl::OkStatus();
}

}  // namespace pipetrain::model
