// Sampling from an exported model (`pipetrain generate`, docs/export.md): greedy generation is
// deterministic and every token it picks is the argmax of a plain forward pass over the text so
// far (also past seq_len, where the window slides); sampling at a temperature is a pure function
// of the seed and draws only ids the model gives probability to; the command reads the model and
// its tokenizer from the export's metadata, and bad flags and files are refused naming the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "model/exported_model.h"
#include "model/safetensors.h"
#include "worker/model/exported_weights.h"
#include "worker/model/generate_command.h"
#include "worker/model/gpt_chunk.h"
#include "worker/model/kv_cache_decoder.h"
#include "worker/model/text_generator.h"

namespace pipetrain::model {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/generate-XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

constexpr GptConfig kConfig{2, 32, 4, 64, 8, 12};

std::unique_ptr<GptChunk> Model(kernels::Backend* backend, uint64_t seed = 3) {
  ChunkOptions options;
  options.seed = seed;
  auto chunk = GptChunk::Create(backend, kConfig, WholeModel(kConfig), options);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return *std::move(chunk);
}

// The argmax predictions of one forward pass over `window` (at most seq_len tokens).
std::vector<int32_t> Predictions(GptChunk& model, const std::vector<int32_t>& window) {
  std::vector<int32_t> tokens(kConfig.seq_len, 0), targets(kConfig.seq_len, kernels::kIgnoreTarget);
  std::copy(window.begin(), window.end(), tokens.begin());
  ForwardInput in;
  in.tokens = tokens;
  in.targets = targets;
  auto out = model.Forward(7, std::move(in));
  EXPECT_TRUE(out.ok()) << out.status();
  model.Discard(7);
  return out.ok() ? out->predictions : std::vector<int32_t>();
}

TEST(TextGenerator, GreedyIsDeterministicAndMatchesAForwardPass) {
  kernels::CpuBackend backend;
  auto model = Model(&backend);
  const std::vector<int32_t> prompt = {1, 2, 10, 3, 4, 11};
  GenerationOptions options;
  options.max_tokens = 12;  // the text outgrows seq_len = 8: the window slides
  auto first = GenerateTokens(*model, prompt, options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 12u);
  auto second = GenerateTokens(*model, prompt, options);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  std::vector<int32_t> text = prompt;
  for (int32_t token : *first) {
    const size_t start = text.size() > 8 ? text.size() - 8 : 0;
    const std::vector<int32_t> window(text.begin() + start, text.end());
    EXPECT_EQ(token, Predictions(*model, window)[window.size() - 1])
        << "token " << text.size() << " is not the forward pass's argmax";
    text.push_back(token);
  }
  // A different model continues differently (the check above is not vacuous).
  auto other = Model(&backend, 99);
  EXPECT_NE(*GenerateTokens(*other, prompt, options), *first);
}

TEST(TextGenerator, SamplingIsAFunctionOfTheSeed) {
  kernels::CpuBackend backend;
  auto model = Model(&backend);
  const std::vector<int32_t> prompt = {5};
  GenerationOptions options;
  options.max_tokens = 24;
  options.temperature = 1.5;
  options.seed = 11;
  auto a = GenerateTokens(*model, prompt, options);
  auto b = GenerateTokens(*model, prompt, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  options.seed = 12;
  auto c = GenerateTokens(*model, prompt, options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*a, *c) << "24 draws at temperature 1.5 from a near-uniform model";
  for (int32_t t : *a) EXPECT_TRUE(t >= 0 && t < kConfig.vocab) << t;
  options.temperature = 0;
  auto greedy = GenerateTokens(*model, prompt, options);
  ASSERT_TRUE(greedy.ok());
  EXPECT_EQ(greedy->size(), 24u);
}

TEST(TextGenerator, BadOptionsNameTheFlag) {
  kernels::CpuBackend backend;
  auto model = Model(&backend);
  GenerationOptions options;
  options.max_tokens = -1;
  EXPECT_THAT(std::string(GenerateTokens(*model, std::vector<int32_t>{1}, options).status().message()),
              HasSubstr("--max-tokens: -1 is not allowed; allowed: >= 0"));
  options.max_tokens = 1;
  options.temperature = -0.5;
  EXPECT_THAT(std::string(GenerateTokens(*model, std::vector<int32_t>{1}, options).status().message()),
              HasSubstr("--temperature: -0.5 is not allowed"));
  options.temperature = 0;
  EXPECT_THAT(std::string(GenerateTokens(*model, std::vector<int32_t>{}, options).status().message()),
              HasSubstr("--prompt: gives no tokens"));
  EXPECT_THAT(std::string(GenerateTokens(*model, std::vector<int32_t>{12}, options).status().message()),
              HasSubstr("--prompt: token 12 is outside the model's vocabulary 0..11"));
}

// A wider vocabulary than the addition task's, and tied embeddings: the KV cache's head reads
// wte transposed.
constexpr GptConfig kCacheConfig{3, 48, 4, 96, 16, 97, /*tie_embeddings=*/false};
constexpr GptConfig kTiedCacheConfig{2, 32, 2, 64, 12, 61, /*tie_embeddings=*/true};

std::unique_ptr<GptChunk> ModelOf(kernels::Backend* backend, const GptConfig& config,
                                  uint64_t seed) {
  ChunkOptions options;
  options.seed = seed;
  auto chunk = GptChunk::Create(backend, config, WholeModel(config), options);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return *std::move(chunk);
}

// The softmax at every position of one forward pass over `window` (padded to seq_len).
std::vector<std::vector<float>> FullPassProbabilities(GptChunk& model,
                                                      const std::vector<int32_t>& window) {
  const int T = model.config().seq_len;
  std::vector<int32_t> tokens(T, 0), targets(T, kernels::kIgnoreTarget);
  std::copy(window.begin(), window.end(), tokens.begin());
  ForwardInput in;
  in.tokens = tokens;
  in.targets = targets;
  EXPECT_TRUE(model.Forward(5, std::move(in)).ok());
  std::vector<std::vector<float>> probs;
  for (size_t i = 0; i < window.size(); ++i) probs.push_back(*model.OutputProbabilities(5, i));
  model.Discard(5);
  return probs;
}

TEST(KvCacheDecoder, EveryAppendGivesTheFullPassDistributionToFloatRounding) {
  kernels::CpuBackend backend;
  for (const GptConfig& config : {kCacheConfig, kTiedCacheConfig}) {
    auto model = ModelOf(&backend, config, 21);
    std::vector<int32_t> text;
    for (int i = 0; i < config.seq_len; ++i) text.push_back((i * 37 + 5) % config.vocab);
    const std::vector<std::vector<float>> want = FullPassProbabilities(*model, text);
    auto decoder = KvCacheDecoder::Create(model.get());
    ASSERT_TRUE(decoder.ok()) << decoder.status();
    // A 5-token prefill, then one token at a time up to seq_len.
    size_t done = 0;
    double worst = 0;
    while (done < text.size()) {
      const size_t k = done == 0 ? 5 : 1;
      auto next = (*decoder)->Append(absl::MakeConstSpan(text).subspan(done, k), true);
      ASSERT_TRUE(next.ok()) << next.status();
      done += k;
      EXPECT_EQ((*decoder)->length(), static_cast<int64_t>(done));
      const std::vector<float>& p = want[done - 1];
      ASSERT_EQ(next->probs.size(), p.size());
      EXPECT_EQ(next->argmax, std::max_element(p.begin(), p.end()) - p.begin()) << done;
      for (size_t v = 0; v < p.size(); ++v) {
        worst = std::max(worst, std::abs(double{next->probs[v]} - p[v]));
      }
    }
    std::printf("tied = %d: largest probability difference, cached vs full pass: %.3g\n",
                config.tie_embeddings, worst);
    EXPECT_LT(worst, 1e-6) << "largest probability difference, tied = " << config.tie_embeddings;
    // Past seq_len the cache refuses (the caller restarts it); Clear starts at position 0 again.
    EXPECT_THAT(std::string((*decoder)->Append(std::vector<int32_t>{1}, false).status().message()),
                HasSubstr("exceed seq_len"));
    (*decoder)->Clear();
    auto again = (*decoder)->Append(absl::MakeConstSpan(text).subspan(0, 5), false);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->probs.empty());
    EXPECT_EQ(again->argmax,
              std::max_element(want[4].begin(), want[4].end()) - want[4].begin());
  }
}

TEST(KvCacheDecoder, CachedAndUncachedGenerationGiveTheSameTokens) {
  kernels::CpuBackend backend;
  for (const GptConfig& config : {kCacheConfig, kTiedCacheConfig}) {
    auto model = ModelOf(&backend, config, 8);
    const std::vector<int32_t> prompt = {3, 14, 15, 9, 26};
    for (double temperature : {0.0, 0.8, 1.5}) {
      GenerationOptions options;
      options.max_tokens = 2 * config.seq_len;  // past seq_len: the window slides
      options.temperature = temperature;
      options.seed = 1234;
      options.kv_cache = true;
      auto cached = GenerateTokens(*model, prompt, options);
      options.kv_cache = false;
      auto uncached = GenerateTokens(*model, prompt, options);
      ASSERT_TRUE(cached.ok() && uncached.ok()) << cached.status() << uncached.status();
      ASSERT_EQ(cached->size(), static_cast<size_t>(options.max_tokens));
      EXPECT_EQ(*cached, *uncached) << "temperature " << temperature << ", tied "
                                    << config.tie_embeddings;
    }
  }
}

// A model exported with the addition task's metadata.
std::string Export(GptChunk& model, const std::string& path,
                   std::map<std::string, std::string> metadata) {
  std::vector<SafetensorsOutput> tensors;
  for (Parameter* p : model.parameters()) {
    auto exported = ExportedTensorFor(model.config(), p->global_layer, p->name);
    EXPECT_TRUE(exported.ok());
    std::vector<float> v = *model.backend()->ToVector(p->value);
    if (exported->transposed) v = Transposed(v, p->value.shape()[0], p->value.shape()[1]);
    tensors.push_back({exported->name, ExportedShape(*exported, p->value.shape()),
                       [v]() -> absl::StatusOr<std::vector<float>> { return v; }});
  }
  EXPECT_TRUE(WriteSafetensors(path, metadata, tensors).ok());
  return path;
}

TEST(GenerateCommand, PrintsThePromptAndItsGreedyCompletion) {
  kernels::CpuBackend backend;
  auto model = Model(&backend);
  v1::JobSpec spec;  // the default source: the addition task's vocabulary
  const std::string weights =
      Export(*model, TempDir() + "/m.safetensors", ExportMetadata(kConfig, spec));
  GenerateRequest request;
  request.weights = weights;
  request.prompts = {"12+34=", "99+1="};
  request.options.max_tokens = 3;
  std::ostringstream out;
  ASSERT_TRUE(GenerateCommand(request, out).ok());
  std::string want;
  for (const std::string& prompt : request.prompts) {
    std::vector<int32_t> ids;
    for (char c : prompt) ids.push_back(c == '+' ? 10 : c == '=' ? 11 : c - '0');
    auto tokens = GenerateTokens(*model, ids, request.options);
    ASSERT_TRUE(tokens.ok());
    want += prompt;
    for (int32_t t : *tokens) want += kAdditionVocabulary[t];
    want += "\n";
  }
  EXPECT_EQ(out.str(), want);
  request.completion_only = true;
  std::ostringstream completions;
  ASSERT_TRUE(GenerateCommand(request, completions).ok());
  EXPECT_EQ(completions.str().size(), 2 * 4u);
}

TEST(GenerateCommand, BadFlagsAndFilesNameTheFlag) {
  kernels::CpuBackend backend;
  auto model = Model(&backend);
  const std::string dir = TempDir();
  v1::JobSpec spec;
  const std::string weights =
      Export(*model, dir + "/m.safetensors", ExportMetadata(kConfig, spec));
  auto error = [](GenerateRequest r) {
    std::ostringstream out;
    return std::string(GenerateCommand(r, out).message());
  };
  GenerateRequest r;
  r.weights = weights;
  r.prompts = {"1+2="};
  GenerateRequest bad = r;
  bad.prompts = {"1*2="};
  EXPECT_THAT(error(bad), HasSubstr("--prompt: '*' is not in the model's vocabulary \"0123456789+=\""));
  bad = r;
  bad.options.max_tokens = -4;
  EXPECT_THAT(error(bad), HasSubstr("--max-tokens: -4 is not allowed"));
  bad = r;
  bad.options.temperature = -1;
  EXPECT_THAT(error(bad), HasSubstr("--temperature: -1 is not allowed"));
  bad = r;
  bad.weights = dir + "/none.safetensors";
  EXPECT_THAT(error(bad), HasSubstr("--weights: " + dir + "/none.safetensors: no such file"));
  bad.weights = Export(*model, dir + "/bare.safetensors", {});
  EXPECT_THAT(error(bad), HasSubstr("--weights: " + dir + "/bare.safetensors: metadata \"n_layer\" is missing"));
  std::map<std::string, std::string> tokens_meta = ExportMetadata(kConfig, spec);
  tokens_meta[kMetaTokenizer] = kTokenizerSentencePiece;
  bad.weights = Export(*model, dir + "/sp.safetensors", tokens_meta);
  EXPECT_THAT(error(bad), HasSubstr("--tokenizer: " + dir + "/tokenizer.model: no such file"));
  tokens_meta[kMetaTokenizer] = "wordpiece";
  bad.weights = Export(*model, dir + "/wp.safetensors", tokens_meta);
  EXPECT_THAT(error(bad), HasSubstr("\"wordpiece\"; known: chars, bytes, sentencepiece"));
}

}  // namespace
}  // namespace pipetrain::model
