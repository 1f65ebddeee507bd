#include "model/gpt_config.h"

#include "absl/strings/str_cat.h"

namespace pipetrain::model {

absl::Status GptConfig::Validate() const {
  auto positive = [](const char* field, int v) -> absl::Status {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(field, " must be > 0, got ", v));
    return absl::OkStatus();
  };
  for (auto s :
       {positive("num_layers", num_layers), positive("hidden", hidden), positive("heads", heads),
        positive("ffn", ffn), positive("seq_len", seq_len), positive("vocab", vocab)}) {
    if (!s.ok()) return s;
  }
  if (hidden % heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden (", hidden, ") must be divisible by heads (", heads, ")"));
  }
  return absl::OkStatus();
}

std::string GptConfig::DebugString() const {
  return absl::StrCat("GptConfig{layers=", num_layers, " hidden=", hidden, " heads=", heads,
                      " ffn=", ffn, " seq_len=", seq_len, " vocab=", vocab,
                      tie_embeddings ? " tied" : "", "}");
}

std::string ChunkSpec::DebugString() const {
  return absl::StrCat("ChunkSpec{blocks=[", first_block, ",", end_block(), ")",
                      has_embedding ? " +embedding" : "", has_head ? " +head" : "", "}");
}

ChunkSpec WholeModel(const GptConfig& config) {
  return ChunkSpec{0, config.num_layers, true, true};
}

absl::Status ValidateChunkSpec(const GptConfig& config, const ChunkSpec& spec) {
  if (spec.first_block < 0 || spec.num_blocks < 0 || spec.end_block() > config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(spec.DebugString(), " is outside the ",
                                                   config.num_layers, " blocks of the model"));
  }
  if (spec.num_blocks == 0 && !spec.has_embedding && !spec.has_head) {
    return absl::InvalidArgumentError("chunk holds no layers");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChunkSpec>> SplitEvenly(const GptConfig& config, int num_chunks) {
  if (num_chunks <= 0 || num_chunks > config.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_chunks must be in [1, ", config.num_layers, "], got ", num_chunks));
  }
  std::vector<ChunkSpec> specs;
  int next = 0;
  for (int c = 0; c < num_chunks; ++c) {
    const int n = config.num_layers / num_chunks + (c < config.num_layers % num_chunks ? 1 : 0);
    specs.push_back(ChunkSpec{next, n, c == 0, c == num_chunks - 1});
    next += n;
  }
  return specs;
}

}  // namespace pipetrain::model
