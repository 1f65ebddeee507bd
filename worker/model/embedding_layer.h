// EmbeddingLayer: token embedding wte [vocab, hidden] plus learned position embedding
// wpe [seq_len, hidden] (global layer 0). F maps token ids to activations; it has no input
// gradient, so B only stores the output gradient for W, which scatters it into dwte/dwpe.
// Token ids are kept in host memory (std::vector, not counted by the allocator).
// Thread-safety: not thread-safe; driven by its chunk's thread.
#ifndef PIPETRAIN_WORKER_MODEL_EMBEDDING_LAYER_H_
#define PIPETRAIN_WORKER_MODEL_EMBEDDING_LAYER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "model/gpt_config.h"
#include "worker/model/parameter.h"

namespace pipetrain::model {

class EmbeddingLayer {
 public:
  struct Stash {
    std::vector<int32_t> tokens;
    kernels::Tensor dout;  // from B to W

    template <typename F>
    void ForEachTensor(F&& f) {
      f(&dout);
    }
  };

  static absl::StatusOr<std::unique_ptr<EmbeddingLayer>> Create(kernels::Backend* backend,
                                                                const GptConfig& config,
                                                                uint64_t seed);
  // tokens.size() must be a multiple of seq_len; returns [tokens.size(), hidden].
  absl::StatusOr<kernels::Tensor> Forward(absl::Span<const int32_t> tokens, Stash* s);
  absl::Status BackwardInput(kernels::Tensor dout, Stash* s);
  // grads = {dwte, dwpe}.
  absl::Status BackwardWeight(Stash* s, absl::Span<kernels::Tensor* const> grads, bool accumulate);
  std::vector<Parameter*> params() { return {&wte_, &wpe_}; }

 private:
  EmbeddingLayer(kernels::Backend* backend, const GptConfig& config)
      : backend_(backend), config_(config) {}
  kernels::Backend* backend_;
  GptConfig config_;
  Parameter wte_, wpe_;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_EMBEDDING_LAYER_H_
