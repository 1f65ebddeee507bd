#include "worker/model/embedding_layer.h"

#include "common/status_macros.h"

namespace pipetrain::model {

using kernels::Tensor;

absl::StatusOr<std::unique_ptr<EmbeddingLayer>> EmbeddingLayer::Create(kernels::Backend* backend,
                                                                       const GptConfig& config,
                                                                       uint64_t seed) {
  std::unique_ptr<EmbeddingLayer> e(new EmbeddingLayer(backend, config));
  const int layer = config.embedding_layer();
  PT_ASSIGN_OR_RETURN(e->wte_, MakeParameter(backend, seed, layer, "wte", ParameterKind::kEmbedding,
                                             {config.vocab, config.hidden}, Init::kNormal, 0.02f));
  PT_ASSIGN_OR_RETURN(e->wpe_,
                      MakeParameter(backend, seed, layer, "wpe", ParameterKind::kEmbedding,
                                    {config.seq_len, config.hidden}, Init::kNormal, 0.01f));
  return e;
}

absl::StatusOr<Tensor> EmbeddingLayer::Forward(absl::Span<const int32_t> tokens, Stash* s) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n % config_.seq_len != 0) {
    return absl::InvalidArgumentError("token count must be a positive multiple of seq_len");
  }
  PT_ASSIGN_OR_RETURN(Tensor out, backend_->Empty({n, config_.hidden}, "embedding output"));
  PT_RETURN_IF_ERROR(
      backend_->EmbeddingForward(tokens, config_.seq_len, wte_.value, wpe_.value, &out));
  s->tokens.assign(tokens.begin(), tokens.end());
  return out;
}

absl::Status EmbeddingLayer::BackwardInput(Tensor dout, Stash* s) {
  if (dout.numel() != static_cast<int64_t>(s->tokens.size()) * config_.hidden) {
    return absl::InvalidArgumentError("embedding output grad has the wrong size");
  }
  s->dout = std::move(dout);
  return absl::OkStatus();
}

absl::Status EmbeddingLayer::BackwardWeight(Stash* s, absl::Span<Tensor* const> grads,
                                            bool accumulate) {
  if (grads.size() != 2) return absl::InvalidArgumentError("embedding expects 2 gradients");
  if (s->dout.empty()) {
    return absl::FailedPreconditionError("embedding BackwardWeight before BackwardInput");
  }
  PT_RETURN_IF_ERROR(backend_->EmbeddingBackward(s->tokens, config_.seq_len, s->dout, accumulate,
                                                 grads[0], grads[1]));
  s->dout.Reset();
  s->tokens.clear();
  return absl::OkStatus();
}

}  // namespace pipetrain::model
