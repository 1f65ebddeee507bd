#include "worker/data/token_corpus_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/mapped_file.h"
#include "model/token_corpus.h"
#include "nlohmann/json.hpp"

namespace pipetrain::data {
namespace {

constexpr int64_t kMaxMetaBytes = 1 << 20;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// meta.json against the spec and the opened files.
absl::Status CheckMeta(const std::string& path, const TokenDataset::Options& options,
                       const TokenCorpus& corpus) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxMetaBytes);
  if (!text.ok()) return text.status();
  const nlohmann::json meta = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  if (!meta.is_object()) return bad("is not a JSON object");
  auto integer = [&](const char* key) -> absl::StatusOr<int64_t> {
    const auto it = meta.find(key);
    if (it == meta.end() || !it->is_number_integer()) {
      return bad(absl::StrCat("has no integer \"", key, "\""));
    }
    return it->get<int64_t>();
  };
  const auto dtype = meta.find(model::kMetaDtype);
  if (dtype == meta.end() || !dtype->is_string()) {
    return bad(absl::StrCat("has no string \"", model::kMetaDtype, "\""));
  }
  const std::string declared = model::TokenDtypeName(options.dtype);
  if (dtype->get<std::string>() != declared) {
    return bad(absl::StrCat("says the ids are ", dtype->get<std::string>(), ", the job reads ",
                            declared,
                            " (set training.data.token_dtype: ", dtype->get<std::string>(), ")"));
  }
  absl::StatusOr<int64_t> vocab = integer(model::kMetaVocabSize);
  if (!vocab.ok()) return vocab.status();
  if (*vocab > options.vocab_size) {
    return bad(absl::StrCat("says the tokenizer has ", *vocab, " ids, more than model.vocab_size (",
                            options.vocab_size, ")"));
  }
  for (const auto& [key, dataset, file] :
       {std::tuple{model::kMetaTrainTokens, corpus.train.get(), model::kTrainTokensFile},
        std::tuple{model::kMetaValTokens, corpus.val.get(), model::kValTokensFile}}) {
    absl::StatusOr<int64_t> count = integer(key);
    if (!count.ok()) return count.status();
    const int64_t actual = dataset == nullptr ? 0 : dataset->num_tokens();
    if (*count != actual) {
      return bad(absl::StrCat("says ", file, " holds ", *count, " ids, it holds ", actual,
                              " (a truncated or replaced file?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenCorpus> OpenTokenCorpus(const std::string& path,
                                            const TokenDataset::Options& options) {
  TokenCorpus corpus;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    // One file (TokenDataset::Open says what is wrong with anything else, a missing path too).
    absl::StatusOr<std::unique_ptr<TokenDataset>> train = TokenDataset::Open(path, options);
    if (!train.ok()) return train.status();
    corpus.train = *std::move(train);
    return corpus;
  }
  const std::string dir = path.back() == '/' ? path : path + "/";
  const std::string train_path = dir + model::kTrainTokensFile;
  if (!Exists(train_path)) {
    return absl::NotFoundError(absl::StrCat(
        train_path, ": no such file (a directory given as training.data.path must hold ",
        model::kTrainTokensFile, ", as `pipetrain data prepare` writes it)"));
  }
  absl::StatusOr<std::unique_ptr<TokenDataset>> train = TokenDataset::Open(train_path, options);
  if (!train.ok()) return train.status();
  corpus.train = *std::move(train);
  if (const std::string val_path = dir + model::kValTokensFile; Exists(val_path)) {
    absl::StatusOr<std::unique_ptr<TokenDataset>> val = TokenDataset::Open(val_path, options);
    if (!val.ok()) return val.status();
    corpus.val = *std::move(val);
  }
  if (const std::string meta_path = dir + model::kTokenMetaFile; Exists(meta_path)) {
    if (absl::Status s = CheckMeta(meta_path, options, corpus); !s.ok()) return s;
  }
  return corpus;
}

}  // namespace pipetrain::data
