#include "tests/runtime/training_fixtures.h"

#include <random>

namespace pipetrain::worker::testing {

model::GptConfig SmallModel(int layers) {
  model::GptConfig c;
  c.num_layers = layers;
  c.hidden = 32;
  c.heads = 4;
  c.ffn = 64;
  c.seq_len = 8;
  c.vocab = 24;
  return c;
}

MicrobatchSource Data(const model::GptConfig& c) {
  return [c](int step, int mb) -> absl::StatusOr<MicrobatchData> {
    std::mt19937 rng(static_cast<uint32_t>(1000 * step + mb + 7));
    std::uniform_int_distribution<int> tok(0, c.vocab - 1);
    MicrobatchData d;
    for (int i = 0; i < kMicrobatchSize * c.seq_len; ++i) {
      d.tokens.push_back(tok(rng));
      d.targets.push_back((d.tokens.back() * 5 + 3) % c.vocab);
    }
    return d;
  };
}

kernels::AdamWConfig Adam() {
  kernels::AdamWConfig a;
  a.lr = 3e-3f;
  a.weight_decay = 0.01f;
  return a;
}

std::vector<std::vector<float>> Weights(kernels::Backend& backend, model::GptChunk& chunk) {
  std::vector<std::vector<float>> out;
  for (model::Parameter* p : chunk.parameters()) out.push_back(*backend.ToVector(p->value));
  return out;
}

}  // namespace pipetrain::worker::testing
