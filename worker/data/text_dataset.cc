#include "worker/data/text_dataset.h"

#include "absl/strings/str_cat.h"
#include "common/mapped_file.h"

namespace pipetrain::data {

absl::StatusOr<std::unique_ptr<TextDataset>> TextDataset::Open(const std::string& path, int seq_len,
                                                               uint64_t seed) {
  absl::StatusOr<std::string> read = ReadRegularFile(path, kMaxBytes);
  if (!read.ok()) return read.status();
  std::string text = *std::move(read);
  if (seq_len <= 0 || static_cast<int64_t>(text.size()) <= seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": has ", text.size(), " bytes; need more than seq_len + 1 = ", seq_len + 1));
  }
  return std::unique_ptr<TextDataset>(new TextDataset(path, std::move(text), seq_len, seed));
}

std::unique_ptr<TextDataset> TextDataset::FromString(std::string text, int seq_len, uint64_t seed) {
  return std::unique_ptr<TextDataset>(new TextDataset("<string>", std::move(text), seq_len, seed));
}

Microbatch TextDataset::Get(int64_t step, int microbatch, int microbatch_size) const {
  Microbatch mb;
  mb.microbatch_size = microbatch_size;
  mb.seq_len = seq_len_;
  const uint64_t starts = text_.size() - static_cast<uint64_t>(seq_len_);  // > 1
  for (int s = 0; s < microbatch_size; ++s) {
    const uint64_t off = MixSeed(seed_, static_cast<uint64_t>(step),
                                 static_cast<uint64_t>(microbatch), static_cast<uint64_t>(s)) %
                         starts;
    for (int t = 0; t < seq_len_; ++t) {
      mb.tokens.push_back(static_cast<unsigned char>(text_[off + t]));
      mb.targets.push_back(static_cast<unsigned char>(text_[off + t + 1]));
    }
  }
  return mb;
}

}  // namespace pipetrain::data
