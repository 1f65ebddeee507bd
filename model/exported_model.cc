#include "model/exported_model.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pipetrain::model {
namespace {

// pipetrain's block parameter names -> GPT-2's, in a block's parameter order.
constexpr const char* kBlockNames[][2] = {
    {"ln1.gamma", "ln_1.weight"},          {"ln1.beta", "ln_1.bias"},
    {"attn.qkv.weight", "attn.c_attn.weight"}, {"attn.qkv.bias", "attn.c_attn.bias"},
    {"attn.proj.weight", "attn.c_proj.weight"}, {"attn.proj.bias", "attn.c_proj.bias"},
    {"ln2.gamma", "ln_2.weight"},          {"ln2.beta", "ln_2.bias"},
    {"mlp.fc.weight", "mlp.c_fc.weight"},  {"mlp.fc.bias", "mlp.c_fc.bias"},
    {"mlp.proj.weight", "mlp.c_proj.weight"}, {"mlp.proj.bias", "mlp.c_proj.bias"},
};

}  // namespace

absl::StatusOr<ExportedTensor> ExportedTensorFor(const GptConfig& config, int global_layer,
                                                 const std::string& param) {
  if (global_layer == config.embedding_layer()) {
    if (param == "wte") return ExportedTensor{"wte.weight", false};
    if (param == "wpe") return ExportedTensor{"wpe.weight", false};
  } else if (global_layer == config.head_layer()) {
    if (param == "lnf.gamma") return ExportedTensor{"ln_f.weight", false};
    if (param == "lnf.beta") return ExportedTensor{"ln_f.bias", false};
    if (param == "lm_head.weight") return ExportedTensor{"lm_head.weight", true};
  } else if (global_layer >= 1 && global_layer <= config.num_layers) {
    for (const auto& [ours, theirs] : kBlockNames) {
      if (param == ours) {
        return ExportedTensor{absl::StrCat("h.", global_layer - 1, ".", theirs), false};
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("parameter ", param, " of layer ", global_layer,
                                                 " has no exported name"));
}

std::vector<int64_t> ExportedShape(const ExportedTensor& tensor,
                                   const std::vector<int64_t>& shape) {
  if (tensor.transposed && shape.size() == 2) return {shape[1], shape[0]};
  return shape;
}

std::vector<float> Transposed(const std::vector<float>& values, int64_t rows, int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = values[r * cols + c];
  }
  return out;
}

std::map<std::string, std::string> ExportMetadata(const GptConfig& config,
                                                  const v1::JobSpec& spec) {
  std::map<std::string, std::string> m = {
      {"format", "pt"},
      {"n_layer", absl::StrCat(config.num_layers)},
      {"n_embd", absl::StrCat(config.hidden)},
      {"n_head", absl::StrCat(config.heads)},
      {"n_inner", absl::StrCat(config.ffn)},
      {"n_positions", absl::StrCat(config.seq_len)},
      {"vocab_size", absl::StrCat(config.vocab)},
      {"layer_norm_epsilon", "1e-05"},
      {"activation_function", "gelu_new"},
      {"tie_word_embeddings", config.tie_embeddings ? "true" : "false"},
  };
  const std::string& source = spec.training().data().source();
  m[kMetaDataSource] = source.empty() ? "default" : source;
  if (source == "text") {
    m[kMetaTokenizer] = kTokenizerBytes;
  } else if (source == "tokens") {
    m[kMetaTokenizer] = kTokenizerSentencePiece;
  } else {
    m[kMetaTokenizer] = kTokenizerChars;
    m[kMetaVocabulary] = kAdditionVocabulary;
  }
  return m;
}

absl::StatusOr<GptConfig> ConfigFromMetadata(const std::map<std::string, std::string>& metadata) {
  GptConfig c;
  for (auto [key, field] : {std::pair<const char*, int*>{"n_layer", &c.num_layers},
                            {"n_embd", &c.hidden},
                            {"n_head", &c.heads},
                            {"n_inner", &c.ffn},
                            {"n_positions", &c.seq_len},
                            {"vocab_size", &c.vocab}}) {
    auto it = metadata.find(key);
    if (it == metadata.end() || !absl::SimpleAtoi(it->second, field) || *field <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata \"", key, "\" is ",
          it == metadata.end() ? "missing" : absl::StrCat("\"", it->second, "\""),
          "; a positive integer is needed"));
    }
  }
  // GPT-2's own flag: the head uses wte (no lm_head.weight in the file).
  if (auto tie = metadata.find("tie_word_embeddings"); tie != metadata.end()) {
    if (tie->second != "true" && tie->second != "false") {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata \"tie_word_embeddings\" is \"", tie->second, "\"; true or false is needed"));
    }
    c.tie_embeddings = tie->second == "true";
  }
  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metadata: ", s.message()));
  }
  return c;
}

}  // namespace pipetrain::model
