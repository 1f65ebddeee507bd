#include "worker/model/exported_tokenizer.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/crc32.h"
#include "common/mapped_file.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "model/exported_model.h"
#include "model/token_corpus.h"

namespace pipetrain::model {
namespace {

namespace fs = std::filesystem;

class CharsTokenizer : public ExportedTokenizer {
 public:
  explicit CharsTokenizer(std::string vocabulary) : vocabulary_(std::move(vocabulary)) {}
  std::string kind() const override { return kTokenizerChars; }
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) override {
    std::vector<int32_t> ids;
    for (char c : text) {
      const size_t at = vocabulary_.find(c);
      if (at == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--prompt: '", std::string(1, c), "' is not in the model's vocabulary \"",
            vocabulary_, "\""));
      }
      ids.push_back(static_cast<int32_t>(at));
    }
    return ids;
  }
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) override {
    std::string text;
    for (int32_t id : ids) {
      if (id >= 0 && id < static_cast<int32_t>(vocabulary_.size())) {
        text += vocabulary_[id];
      } else {
        absl::StrAppend(&text, "<", id, ">");
      }
    }
    return text;
  }

 private:
  std::string vocabulary_;
};

class BytesTokenizer : public ExportedTokenizer {
 public:
  std::string kind() const override { return kTokenizerBytes; }
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) override {
    std::string text;
    for (int32_t id : ids) {
      if (id >= 0 && id < 256) {
        text += static_cast<char>(id);
      } else {
        absl::StrAppend(&text, "<", id, ">");
      }
    }
    return text;
  }
};

// Runs `pipetrain-data encode|decode` and returns its stdout.
class SentencePieceTokenizer : public ExportedTokenizer {
 public:
  SentencePieceTokenizer(std::string model, std::string data_tool)
      : model_(std::move(model)), data_tool_(std::move(data_tool)) {}
  ~SentencePieceTokenizer() override {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  std::string kind() const override { return kTokenizerSentencePiece; }
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) override {
    PT_ASSIGN_OR_RETURN(std::string out, Run({"encode", "--tokenizer", model_, "--text", text}));
    std::vector<int32_t> ids;
    for (absl::string_view word : absl::StrSplit(out, ' ', absl::SkipWhitespace())) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(word, &id)) {
        return absl::InternalError(absl::StrCat(data_tool_, " encode printed \"", word, "\""));
      }
      ids.push_back(id);
    }
    return ids;
  }
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) override {
    return Run({"decode", "--tokenizer", model_, "--ids", absl::StrJoin(ids, " ")});
  }

 private:
  absl::StatusOr<std::string> Run(std::vector<std::string> args) {
    if (dir_.empty()) dir_ = subprocess::TempDir();
    args.insert(args.begin(), data_tool_);
    const std::string log = absl::StrCat(dir_, "/call", calls_++);
    const subprocess::Process p = subprocess::Spawn(args, log);
    const std::optional<int> code = subprocess::WaitFor(p, absl::Seconds(60));
    if (code != 0) {
      return absl::InternalError(absl::StrCat(data_tool_, " ", args[1], " failed (",
                                              code ? absl::StrCat("exit ", *code) : "timed out",
                                              "): ", subprocess::ReadFile(log + ".err")));
    }
    return subprocess::ReadFile(log + ".out");
  }

  std::string model_;
  std::string data_tool_;
  std::string dir_;
  int calls_ = 0;
};

absl::StatusOr<std::string> FindDataTool() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::vector<fs::path> candidates = {self / "pipetrain-data",
                                      self / ".." / "client" / "pipetrain-data"};
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      candidates.push_back(fs::path(std::string(dir)) / "pipetrain-data");
    }
  }
  for (const fs::path& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c, ec).string();
  }
  return absl::NotFoundError(
      "cannot find the pipetrain-data binary (it applies SentencePiece tokenizers) next to " +
      self.string() + ", in the build tree, or on PATH");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExportedTokenizer>> ExportedTokenizer::ForModel(
    const SafetensorsFile& weights, const std::string& tokenizer_path,
    const std::string& data_tool) {
  const auto& meta = weights.metadata();
  auto it = meta.find(kMetaTokenizer);
  const std::string kind = it == meta.end() ? "" : it->second;
  if (kind == kTokenizerChars) {
    auto vocab = meta.find(kMetaVocabulary);
    if (vocab == meta.end() || vocab->second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--weights: ", weights.path(), " names the \"chars\" tokenizer but records no ",
          kMetaVocabulary));
    }
    return std::make_unique<CharsTokenizer>(vocab->second);
  }
  if (kind == kTokenizerBytes) return std::make_unique<BytesTokenizer>();
  if (kind != kTokenizerSentencePiece) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--weights: ", weights.path(), " has metadata ", kMetaTokenizer, " \"", kind,
        "\"; known: chars, bytes, sentencepiece (files written by `pipetrain export`)"));
  }
  std::string model = tokenizer_path;
  if (model.empty()) {
    const fs::path dir = fs::path(weights.path()).parent_path();
    model = (dir / kTokenizerFile).string();
  }
  absl::StatusOr<std::string> bytes = ReadRegularFile(model, int64_t{1} << 30);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer: ", bytes.status().message(),
        tokenizer_path.empty() ? " (the model's SentencePiece tokenizer is looked for beside "
                                 "--weights; name it with --tokenizer)"
                               : ""));
  }
  if (auto crc = meta.find(kMetaTokenizerCrc32); crc != meta.end()) {
    const std::string actual = absl::StrCat(Crc32(0, bytes->data(), bytes->size()));
    if (actual != crc->second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tokenizer: ", model, " is not the tokenizer this model was trained with (CRC-32 ",
          actual, ", the export recorded ", crc->second, ")"));
    }
  }
  std::string tool = data_tool;
  if (tool.empty()) {
    PT_ASSIGN_OR_RETURN(tool, FindDataTool());
  }
  return std::make_unique<SentencePieceTokenizer>(model, tool);
}

}  // namespace pipetrain::model
