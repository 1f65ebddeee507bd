#include "client/data_prepare.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/sentencepiece_tokenizer.h"
#include "client/token_file_writer.h"
#include "common/atomic_file.h"
#include "common/mapped_file.h"
#include "nlohmann/json.hpp"

namespace pipetrain::client {
namespace {

namespace fs = std::filesystem;

// Longest training sentence handed to the trainer (it skips longer ones): long lines are cut.
constexpr int64_t kMaxSentenceBytes = 4096;

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// `at` moved back to a UTF-8 character start (never below `floor`).
int64_t CharStartAtOrBefore(std::string_view text, int64_t at, int64_t floor) {
  while (at > floor && at < static_cast<int64_t>(text.size()) && IsUtf8Continuation(text[at])) {
    --at;
  }
  return at;
}

// The training text's lines, cut to kMaxSentenceBytes, from evenly spread regions totalling at
// most `budget` bytes (all of it when it is smaller).
class SampledLines : public SentenceSource {
 public:
  SampledLines(std::string_view text, int64_t budget) : text_(text) {
    const int64_t size = static_cast<int64_t>(text.size());
    if (size <= budget) {
      regions_.push_back({0, size});
      return;
    }
    constexpr int64_t kRegions = 1024;
    const int64_t take = std::max<int64_t>(1, budget / kRegions);
    for (int64_t i = 0; i < kRegions; ++i) {
      // From a line start to a line end, looking no further than kMaxSentenceBytes for them (a
      // text without line ends must not cost a scan per region).
      int64_t begin = size * i / kRegions;
      const int64_t begin_limit = std::min(size, begin + kMaxSentenceBytes);
      while (begin > 0 && begin < begin_limit && text[begin - 1] != '\n') ++begin;
      begin = CharStartAtOrBefore(text, begin, 0);
      int64_t end = std::min(size, begin + take);
      const int64_t end_limit = std::min(size, end + kMaxSentenceBytes);
      while (end < end_limit && text[end - 1] != '\n') ++end;
      if (begin < end) regions_.push_back({begin, end});
    }
  }

  bool Next(std::string_view* sentence) override {
    while (region_ < regions_.size()) {
      auto& [begin, end] = regions_[region_];
      if (pos_ < begin) pos_ = begin;
      if (pos_ >= end) {
        ++region_;
        continue;
      }
      // The line, or its next kMaxSentenceBytes (scanning no further).
      const int64_t limit = std::min(end, pos_ + kMaxSentenceBytes + 1);
      int64_t line_end = pos_;
      while (line_end < limit && text_[line_end] != '\n') ++line_end;
      const bool whole = line_end < end && text_[line_end] == '\n';
      int64_t cut = line_end;
      if (cut - pos_ > kMaxSentenceBytes) {
        cut = CharStartAtOrBefore(text_, pos_ + kMaxSentenceBytes, pos_ + 1);
      }
      const int64_t start = pos_;
      pos_ = whole && cut == line_end ? line_end + 1 : cut;
      if (cut > start) {
        *sentence = text_.substr(start, cut - start);
        return true;
      }
    }
    return false;
  }

 private:
  std::string_view text_;
  std::vector<std::pair<int64_t, int64_t>> regions_;
  size_t region_ = 0;
  int64_t pos_ = 0;
};

// Pieces of text[begin, end) of about `chunk` bytes whose encodings, concatenated, are the
// whole range's: cut after a line end, else before a space (pieces never span either), else at
// a character start.
std::vector<std::pair<int64_t, int64_t>> Chunks(std::string_view text, int64_t begin, int64_t end,
                                                int64_t chunk) {
  std::vector<std::pair<int64_t, int64_t>> out;
  while (begin < end) {
    int64_t cut = std::min(end, begin + chunk);
    if (cut < end) {
      const int64_t limit = std::min(end, cut + chunk);
      int64_t nl = cut;
      while (nl < limit && text[nl - 1] != '\n') ++nl;
      if (text[nl - 1] == '\n') {
        cut = nl;
      } else {
        int64_t space = cut;
        while (space > begin + 1 && text[space] != ' ') --space;
        cut = text[space] == ' ' ? space : CharStartAtOrBefore(text, cut, begin + 1);
      }
    }
    out.push_back({begin, cut});
    begin = cut;
  }
  return out;
}

// Encoding progress by input bytes, on lines of `out`, when the input is large.
class Progress {
 public:
  Progress(std::ostream& out, int64_t total, bool enabled)
      : out_(out), total_(total), enabled_(enabled) {}
  void Add(int64_t bytes) {
    done_ += bytes;
    if (!enabled_ || (done_ - reported_ < total_ / 20 && done_ < total_)) return;
    reported_ = done_;
    out_ << absl::StrFormat("pipetrain data prepare: encoded %.1f of %.1f MiB (%.0f%%)\n",
                            done_ / 1048576.0, total_ / 1048576.0, 100.0 * done_ / total_)
         << std::flush;
  }

 private:
  std::ostream& out_;
  int64_t total_;
  bool enabled_;
  int64_t done_ = 0;
  int64_t reported_ = 0;
};

// Encodes text[begin, end) into `writer`, `threads` pieces at a time, in order.
absl::Status EncodeRange(const Tokenizer& tokenizer, std::string_view text, int64_t begin,
                         int64_t end, const DataPrepareOptions& options, int threads,
                         TokenFileWriter* writer, Progress* progress) {
  const std::vector<std::pair<int64_t, int64_t>> chunks =
      Chunks(text, begin, end, options.encode_chunk_bytes);
  for (size_t first = 0; first < chunks.size(); first += threads) {
    const size_t count = std::min(chunks.size() - first, static_cast<size_t>(threads));
    std::vector<std::vector<int>> ids(count);
    std::vector<std::string> errors(count);
    std::vector<std::thread> workers;
    for (size_t i = 0; i < count; ++i) {
      workers.emplace_back([&, i] {
        const auto [b, e] = chunks[first + i];
        errors[i] = tokenizer.Encode(text.substr(b, e - b), &ids[i]);
      });
    }
    for (std::thread& t : workers) t.join();
    for (size_t i = 0; i < count; ++i) {
      if (!errors[i].empty()) {
        return absl::InternalError(absl::StrCat("encoding bytes ", chunks[first + i].first, "..",
                                                chunks[first + i].second, ": ", errors[i]));
      }
      if (absl::Status s = writer->Append(ids[i]); !s.ok()) return s;
      progress->Add(chunks[first + i].second - chunks[first + i].first);
    }
  }
  return absl::OkStatus();
}

absl::Status RemoveIfPresent(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": cannot remove: ", ec.message()));
  return absl::OkStatus();
}

std::string YamlQuoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

absl::Status ValidateDataPrepareOptions(const DataPrepareOptions& options) {
  if (options.input.empty()) return absl::InvalidArgumentError("--input: required");
  if (options.output.empty()) return absl::InvalidArgumentError("--output: required");
  if (options.vocab_size < kMinPrepareVocab || options.vocab_size > kMaxPrepareVocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab-size: ", options.vocab_size, " is not allowed; allowed: ", kMinPrepareVocab, "..",
        kMaxPrepareVocab, " (256 byte pieces and 3 special ids are part of it)"));
  }
  if (!std::isfinite(options.val_fraction) || options.val_fraction < 0 ||
      options.val_fraction > 0.5) {
    return absl::InvalidArgumentError(
        absl::StrCat("--val-fraction: ", options.val_fraction,
                     " is not allowed; allowed: 0..0.5 (0 writes no val.bin)"));
  }
  if (options.model_type != "bpe" && options.model_type != "unigram") {
    return absl::InvalidArgumentError(absl::StrCat("--model-type: \"", options.model_type,
                                                   "\" is not allowed; allowed: bpe, unigram"));
  }
  if (options.threads < 0 || options.threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--threads: ", options.threads, " is not allowed; allowed: 0 (all cores)..1024"));
  }
  return absl::OkStatus();
}

int64_t ValidationStart(std::string_view text, double fraction) {
  const int64_t size = static_cast<int64_t>(text.size());
  if (fraction <= 0 || size == 0) return size;
  const int64_t nominal =
      std::clamp<int64_t>(static_cast<int64_t>(std::floor(size * (1.0 - fraction))), 0, size);
  for (int64_t p = nominal; p < size; ++p) {
    if (p == 0 || text[p - 1] == '\n') return p;
  }
  int64_t p = nominal;
  while (p < size && IsUtf8Continuation(text[p])) ++p;
  return p;
}

absl::StatusOr<PreparedData> PrepareData(const DataPrepareOptions& options,
                                         std::ostream& progress_out) {
  if (absl::Status s = ValidateDataPrepareOptions(options); !s.ok()) return s;
  absl::StatusOr<MappedFile> input = MappedFile::Open(options.input);
  if (!input.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--input: ", input.status().message()));
  }
  const std::string_view text(reinterpret_cast<const char*>(input->data()),
                              static_cast<size_t>(input->size()));
  std::error_code ec;
  fs::create_directories(options.output, ec);
  if (!fs::is_directory(options.output)) {
    return absl::InvalidArgumentError(absl::StrCat("--output: ", options.output,
                                                   " is not a directory and cannot be made one",
                                                   ec ? ": " + ec.message() : ""));
  }
  PreparedData data;
  data.dir = fs::absolute(options.output).lexically_normal().string();
  if (data.dir.size() > 1 && data.dir.back() == '/') data.dir.pop_back();
  const std::string dir = data.dir + "/";
  // meta.json marks a complete directory: gone while the files change.
  if (absl::Status s = RemoveIfPresent(dir + model::kTokenMetaFile); !s.ok()) return s;

  data.input_name = fs::path(options.input).filename().string();
  data.input_bytes = input->size();
  data.val_start_byte = ValidationStart(text, options.val_fraction);
  data.model_type = options.model_type;
  if (data.val_start_byte == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--val-fraction: ", options.val_fraction,
                                                   " leaves no training text in --input ",
                                                   options.input, " (", data.input_bytes,
                                                   " bytes): the validation part starts at its "
                                                   "first line"));
  }
  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  // The tokenizer learns from the training text only.
  TokenizerTrainOptions train;
  train.model_type = options.model_type;
  train.vocab_size = options.vocab_size;
  train.threads = threads;
  train.max_sentence_bytes = static_cast<int>(kMaxSentenceBytes) + 96;
  SampledLines lines(text.substr(0, data.val_start_byte), options.tokenizer_sample_bytes);
  std::string model;
  if (std::string error = TrainTokenizer(train, &lines, &model); !error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab-size: ", options.vocab_size, ": no ", options.model_type,
                     " tokenizer could be trained on --input ", options.input, ": ", error));
  }
  std::string error;
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::FromSerialized(model, &error);
  if (tokenizer == nullptr) return absl::InternalError(absl::StrCat("tokenizer: ", error));
  data.vocab_size = tokenizer->vocab_size();
  data.dtype = model::TokenDtypeForVocab(data.vocab_size);

  Progress progress(progress_out, data.input_bytes, data.input_bytes >= options.progress_min_bytes);
  const struct {
    const char* file;
    int64_t begin, end;
    int64_t* tokens;
  } splits[] = {{model::kTrainTokensFile, 0, data.val_start_byte, &data.train_tokens},
                {model::kValTokensFile, data.val_start_byte, data.input_bytes, &data.val_tokens}};
  for (const auto& split : splits) {
    const std::string path = dir + split.file;
    if (split.begin == split.end) {  // no validation text: no (stale) val.bin either
      if (absl::Status s = RemoveIfPresent(path); !s.ok()) return s;
      continue;
    }
    absl::StatusOr<std::unique_ptr<TokenFileWriter>> writer =
        TokenFileWriter::Create(path, data.dtype);
    if (!writer.ok()) return writer.status();
    if (absl::Status s = EncodeRange(*tokenizer, text, split.begin, split.end, options, threads,
                                     writer->get(), &progress);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = (*writer)->Commit(); !s.ok()) return s;
    *split.tokens = (*writer)->tokens();
  }
  if (absl::Status s = WriteFileAtomically(dir + model::kTokenizerFile, model); !s.ok()) return s;

  nlohmann::json meta;
  meta[model::kMetaFormat] = model::kMetaFormatValue;
  meta[model::kMetaDtype] = model::TokenDtypeName(data.dtype);
  meta[model::kMetaVocabSize] = data.vocab_size;
  meta[model::kMetaTrainTokens] = data.train_tokens;
  meta[model::kMetaValTokens] = data.val_tokens;
  meta[model::kMetaInputName] = data.input_name;
  meta[model::kMetaInputBytes] = data.input_bytes;
  meta[model::kMetaValStartByte] = data.val_start_byte;
  meta[model::kMetaModelType] = data.model_type;
  if (absl::Status s = WriteFileAtomically(dir + model::kTokenMetaFile, meta.dump(2) + "\n");
      !s.ok()) {
    return s;
  }
  return data;
}

std::string JobFileSnippet(const PreparedData& data) {
  std::string out = "model:\n";
  absl::StrAppend(&out, "  vocab_size: ", data.vocab_size, "\n");
  absl::StrAppend(&out, "  # seq_len: ", model::kDefaultTokensSeqLen,
                  "  # tokens per sequence (the default for tokens)\n");
  out += "training:\n  data:\n    source: tokens\n";
  absl::StrAppend(&out, "    path: ", YamlQuoted(data.dir), "\n");
  absl::StrAppend(&out, "    token_dtype: ", model::TokenDtypeName(data.dtype), "\n");
  return out;
}

absl::Status DataPrepareCommand(const DataPrepareOptions& options, std::ostream& out,
                                std::ostream& err) {
  absl::StatusOr<PreparedData> data = PrepareData(options, err);
  if (!data.ok()) return data.status();
  out << "wrote " << data->dir << ": " << model::kTrainTokensFile << " " << data->train_tokens
      << " tokens, " << model::kValTokensFile << " " << data->val_tokens << " tokens ("
      << model::TokenDtypeName(data->dtype) << "), " << model::kTokenizerFile << " ("
      << data->model_type << ", vocabulary " << data->vocab_size << "), " << model::kTokenMetaFile
      << "\n"
      << "from " << options.input << " (" << data->input_bytes << " bytes; validation from byte "
      << data->val_start_byte << ")\n\n"
      << "# Job-file lines that train on it (docs/data.md):\n"
      << JobFileSnippet(*data);
  return absl::OkStatus();
}

}  // namespace pipetrain::client
