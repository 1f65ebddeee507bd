#include "worker/data/dataset.h"

namespace pipetrain::data {
namespace {
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

Microbatch ValidationMicrobatch(const Dataset& validation, int index, int microbatch_size) {
  return validation.Get(/*step=*/0, index, microbatch_size);
}

uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return SplitMix64(SplitMix64(SplitMix64(SplitMix64(seed) ^ a) ^ b) ^ c);
}

void Accuracy::Add(const Accuracy& o) {
  correct_tokens += o.correct_tokens;
  scored_tokens += o.scored_tokens;
  exact_sequences += o.exact_sequences;
  sequences += o.sequences;
}

double Accuracy::token_accuracy() const {
  return scored_tokens == 0 ? 0.0 : static_cast<double>(correct_tokens) / scored_tokens;
}

double Accuracy::exact_match() const {
  return sequences == 0 ? 0.0 : static_cast<double>(exact_sequences) / sequences;
}

Accuracy Score(const Microbatch& mb, const std::vector<int32_t>& predictions) {
  Accuracy a;
  for (int64_t s = 0; s < mb.microbatch_size; ++s) {
    bool all = true;
    for (int64_t t = 0; t < mb.seq_len; ++t) {
      const size_t i = static_cast<size_t>(s * mb.seq_len + t);
      if (mb.targets[i] < 0) continue;
      ++a.scored_tokens;
      const bool ok = i < predictions.size() && predictions[i] == mb.targets[i];
      a.correct_tokens += ok ? 1 : 0;
      all = all && ok;
    }
    a.exact_sequences += all ? 1 : 0;
    ++a.sequences;
  }
  return a;
}

}  // namespace pipetrain::data
