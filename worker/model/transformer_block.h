// TransformerBlock: one pre-layernorm GPT block,
//   x1 = x0 + Wo Attn(LN1(x0)) + bo;  x2 = x1 + W2 GELU(W1 LN2(x1) + b1) + b2,
// with its forward (F), input-gradient (B) and weight-gradient (W) passes split as zero-bubble
// schedules need. Per microbatch state lives in a Stash owned by the caller (the chunk), so many
// microbatches can be in flight. F fills the stash; B frees what only B needed and adds the
// output gradients W needs; W consumes the stash entirely.
// Thread-safety: not thread-safe; driven by its chunk's thread.
#ifndef PIPETRAIN_WORKER_MODEL_TRANSFORMER_BLOCK_H_
#define PIPETRAIN_WORKER_MODEL_TRANSFORMER_BLOCK_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "model/gpt_config.h"
#include "worker/model/parameter.h"

namespace pipetrain::model {

class TransformerBlock {
 public:
  // Activations stored between passes (all device tensors from the counting allocator).
  struct Stash {
    int64_t batch = 0;
    // Kept from F to W.
    kernels::Tensor x0, ln1, mean1, rstd1, att, x1, ln2, mean2, rstd2, g;
    // Kept from F to B only.
    kernels::Tensor qkv, h;
    // Produced by B, consumed by W (gradients of linear/layernorm outputs).
    kernels::Tensor dm, dh, dln2, dproj, dqkv, dln1;

    template <typename F>
    void ForEachTensor(F&& f) {
      for (kernels::Tensor* t : {&x0, &ln1, &mean1, &rstd1, &att, &x1, &ln2, &mean2, &rstd2, &g,
                                 &qkv, &h, &dm, &dh, &dln2, &dproj, &dqkv, &dln1}) {
        f(t);
      }
    }
  };

  // `block` is the 0-based block index (global layer index block + 1).
  static absl::StatusOr<std::unique_ptr<TransformerBlock>> Create(kernels::Backend* backend,
                                                                  const GptConfig& config,
                                                                  int block, uint64_t seed);

  // x [batch*seq_len, hidden] is moved into the stash; returns x2.
  absl::StatusOr<kernels::Tensor> Forward(kernels::Tensor x, int64_t batch, Stash* s);
  // dy = dL/dx2 (moved into the stash); returns dL/dx0.
  absl::StatusOr<kernels::Tensor> BackwardInput(kernels::Tensor dy, Stash* s);
  // Writes (accumulate=false) or adds (accumulate=true) this microbatch's weight gradients into
  // grads (same order and shapes as params()), then frees the stash.
  absl::Status BackwardWeight(Stash* s, absl::Span<kernels::Tensor* const> grads, bool accumulate);

  std::vector<Parameter*> params();

 private:
  TransformerBlock(kernels::Backend* backend, const GptConfig& config)
      : backend_(backend), config_(config) {}

  kernels::Backend* backend_;
  GptConfig config_;
  Parameter ln1_g_, ln1_b_, qkv_w_, qkv_b_, proj_w_, proj_b_, ln2_g_, ln2_b_, fc_w_, fc_b_, fc2_w_,
      fc2_b_;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_TRANSFORMER_BLOCK_H_
