#include "client/tokenize_command.h"

#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/sentencepiece_tokenizer.h"
#include "common/mapped_file.h"

namespace pipetrain::client {
namespace {

absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path) {
  absl::StatusOr<std::string> model = ReadRegularFile(path, int64_t{1} << 30);
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--tokenizer: ", model.status().message()));
  }
  std::string error;
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::FromSerialized(*model, &error);
  if (tokenizer == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer: ", path, " is not a SentencePiece model: ", error));
  }
  return tokenizer;
}

}  // namespace

absl::Status EncodeCommand(const std::string& tokenizer_path, const std::string& text,
                           std::ostream& out) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Load(tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  std::vector<int> ids;
  if (std::string error = (*tokenizer)->Encode(text, &ids); !error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--text: ", error));
  }
  out << absl::StrJoin(ids, " ") << "\n";
  return absl::OkStatus();
}

absl::Status DecodeCommand(const std::string& tokenizer_path, const std::string& ids_text,
                           std::ostream& out) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Load(tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  std::vector<int> ids;
  for (absl::string_view word : absl::StrSplit(ids_text, ' ', absl::SkipWhitespace())) {
    int id = 0;
    if (!absl::SimpleAtoi(word, &id) || id < 0 || id >= (*tokenizer)->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("--ids: \"", word, "\" is not an id 0..",
                                                     (*tokenizer)->vocab_size() - 1));
    }
    ids.push_back(id);
  }
  std::string text;
  if (std::string error = (*tokenizer)->Decode(ids, &text); !error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--ids: ", error));
  }
  out << text;
  return absl::OkStatus();
}

}  // namespace pipetrain::client
