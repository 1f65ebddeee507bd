// Helpers for the model tests: small configs, random tokens and parameters, gradient snapshots.
// Thread-safety: pure functions / single-threaded use.
#ifndef PIPETRAIN_TESTS_MODEL_MODEL_TEST_UTIL_H_
#define PIPETRAIN_TESTS_MODEL_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain::model::testing {

inline GptConfig TinyConfig(int layers = 2) {
  GptConfig c;
  c.num_layers = layers;
  c.hidden = 16;
  c.heads = 2;
  c.ffn = 32;
  c.seq_len = 6;
  c.vocab = 11;
  return c;
}

inline std::vector<int32_t> RandomTokens(int64_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// Key of a parameter independent of the partition.
inline std::string Key(const Parameter& p) { return absl::StrCat(p.global_layer, "/", p.name); }

// Replaces every parameter by random values (gamma around 1) that depend on (seed, layer, name)
// only, so chunks of one model stay consistent.
inline void RandomizeParameters(GptChunk* chunk, uint64_t seed) {
  for (Parameter* p : chunk->parameters()) {
    std::vector<float> v =
        NormalValues(seed, p->global_layer, p->name + "#test", p->value.numel(), 0.2f);
    if (p->name.find("gamma") != std::string::npos) {
      for (float& x : v) x += 1.0f;
    }
    CHECK(chunk->backend()->Upload(v, &p->value).ok());
  }
}

inline std::map<std::string, std::vector<float>> Grads(GptChunk* chunk) {
  std::map<std::string, std::vector<float>> out;
  for (Parameter* p : chunk->parameters()) out[Key(*p)] = *chunk->backend()->ToVector(p->grad);
  return out;
}

inline std::map<std::string, std::vector<float>> Values(GptChunk* chunk) {
  std::map<std::string, std::vector<float>> out;
  for (Parameter* p : chunk->parameters()) out[Key(*p)] = *chunk->backend()->ToVector(p->value);
  return out;
}

}  // namespace pipetrain::model::testing

#endif  // PIPETRAIN_TESTS_MODEL_MODEL_TEST_UTIL_H_
