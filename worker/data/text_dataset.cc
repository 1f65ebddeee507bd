#include "worker/data/text_dataset.h"

#include "absl/strings/str_cat.h"
#include "common/mapped_file.h"

namespace pipetrain::data {

absl::StatusOr<std::unique_ptr<TextDataset>> TextDataset::Make(std::string path, std::string text,
                                                               int seq_len, uint64_t seed,
                                                               Split split) {
  const int64_t size = static_cast<int64_t>(text.size());
  if (seq_len <= 0 || size <= seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": has ", size, " bytes; need more than seq_len + 1 = ", seq_len + 1));
  }
  const int64_t cut = ValidationStart(size);
  const int64_t begin = split == Split::kValidation ? cut : 0;
  const int64_t end = split == Split::kTrain ? cut : size;
  if (end - begin <= seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": its ", split == Split::kValidation ? "validation part (the last tenth, held out "
                                                      "for evaluation)"
                                                    : "training part (all but the last tenth, "
                                                      "held out for evaluation)",
        " has ", end - begin, " of its ", size, " bytes; need more than seq_len + 1 = ",
        seq_len + 1));
  }
  return std::unique_ptr<TextDataset>(
      new TextDataset(std::move(path), std::move(text), seq_len, seed, begin, end));
}

absl::StatusOr<std::unique_ptr<TextDataset>> TextDataset::Open(const std::string& path, int seq_len,
                                                               uint64_t seed, Split split) {
  absl::StatusOr<std::string> read = ReadRegularFile(path, kMaxBytes);
  if (!read.ok()) return read.status();
  return Make(path, *std::move(read), seq_len, seed, split);
}

absl::StatusOr<std::unique_ptr<TextDataset>> TextDataset::FromString(std::string text,
                                                                     int seq_len, uint64_t seed,
                                                                     Split split) {
  return Make("<string>", std::move(text), seq_len, seed, split);
}

Microbatch TextDataset::Get(int64_t step, int microbatch, int microbatch_size) const {
  Microbatch mb;
  mb.microbatch_size = microbatch_size;
  mb.seq_len = seq_len_;
  const uint64_t starts = static_cast<uint64_t>(end_ - begin_ - seq_len_);  // > 1
  for (int s = 0; s < microbatch_size; ++s) {
    const uint64_t off =
        static_cast<uint64_t>(begin_) +
        MixSeed(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(microbatch),
                static_cast<uint64_t>(s)) %
            starts;
    for (int t = 0; t < seq_len_; ++t) {
      mb.tokens.push_back(static_cast<unsigned char>(text_[off + t]));
      mb.targets.push_back(static_cast<unsigned char>(text_[off + t + 1]));
    }
  }
  return mb;
}

}  // namespace pipetrain::data
