// LmHead: final layernorm, LM head projection W [hidden, vocab] (no bias) and the cross-entropy
// loss (global layer num_layers + 1). With config.tie_embeddings the projection is the token
// embedding instead: logits = x wte^T with wte [vocab, hidden], held here as a copy that is
// initialised (as layer 0's "wte") and updated like the embedding's (GptChunk keeps them equal). F
// takes the last block's output and the targets and returns the microbatch's mean token loss; its
// gradient is scaled by `loss_scale` (1 / num_microbatches for gradient accumulation). B returns
// dL/dx; W accumulates dW and the layernorm's gradients.
// Thread-safety: not thread-safe; driven by its chunk's thread.
#ifndef PIPETRAIN_WORKER_MODEL_LM_HEAD_H_
#define PIPETRAIN_WORKER_MODEL_LM_HEAD_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "model/gpt_config.h"
#include "worker/model/parameter.h"

namespace pipetrain::model {

class LmHead {
 public:
  struct Stash {
    std::vector<int32_t> targets;
    float loss_scale = 1.0f;
    kernels::Tensor x, lnf, mean, rstd;  // F -> W
    kernels::Tensor probs;               // F -> B
    kernels::Tensor dlogits, dlnf;       // B -> W

    template <typename F>
    void ForEachTensor(F&& f) {
      for (kernels::Tensor* t : {&x, &lnf, &mean, &rstd, &probs, &dlogits, &dlnf}) f(t);
    }
  };
  struct Output {
    double loss = 0;  // mean cross-entropy over valid targets (unscaled)
    int64_t valid_targets = 0;
    std::vector<int32_t> predictions;  // argmax per position
  };

  static absl::StatusOr<std::unique_ptr<LmHead>> Create(kernels::Backend* backend,
                                                        const GptConfig& config, uint64_t seed);
  absl::StatusOr<Output> Forward(kernels::Tensor x, absl::Span<const int32_t> targets,
                                 float loss_scale, Stash* s);
  absl::StatusOr<kernels::Tensor> BackwardInput(Stash* s);
  // grads = {dgamma, dbeta, dW}.
  absl::Status BackwardWeight(Stash* s, absl::Span<kernels::Tensor* const> grads, bool accumulate);
  std::vector<Parameter*> params() { return {&lnf_g_, &lnf_b_, &w_}; }
  // The projection's parameter (lm_head.weight, or the copy of wte when tied).
  Parameter* projection() { return &w_; }

 private:
  LmHead(kernels::Backend* backend, const GptConfig& config) : backend_(backend), config_(config) {}
  kernels::Backend* backend_;
  GptConfig config_;
  Parameter lnf_g_, lnf_b_, w_;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_LM_HEAD_H_
