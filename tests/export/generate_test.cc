// Sampling from an exported model (`pipetrain generate`, docs/export.md): greedy generation is
// deterministic and every token it picks is the argmax of a plain forward pass over the text so
// far (also past seq_len, where the window slides); sampling at a temperature is a pure function
// of the seed and draws only ids the model gives probability to; the command reads the model and
// its tokenizer from the export's metadata, and bad flags and files are refused naming the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "model/exported_model.h"
#include "model/safetensors.h"
#include "worker/model/exported_weights.h"
#include "worker/model/generate_command.h"
#include "worker/model/gpt_chunk.h"
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
