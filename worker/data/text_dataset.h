// TextDataset: byte-level language modelling on any file (vocabulary = 256 byte values). Each
// sequence is a window of seq_len + 1 bytes starting at an offset drawn deterministically from
// (seed, step, microbatch, sequence); inputs are the first seq_len bytes, targets the next ones.
// Split: with evaluation the file's last tenth (from byte size - size / 10) is held out:
// kValidation draws its windows there, kTrain from the rest; kAll draws from the whole file.
// Thread-safety: immutable after Open; thread-safe.
#ifndef PIPETRAIN_WORKER_DATA_TEXT_DATASET_H_
#define PIPETRAIN_WORKER_DATA_TEXT_DATASET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"

namespace pipetrain::data {

class TextDataset : public Dataset {
 public:
  // The whole file is read into memory, so it may have at most this many bytes (larger corpora:
  // the "tokens" source, which maps its file instead; docs/data.md).
  static constexpr int64_t kMaxBytes = int64_t{1} << 30;

  // Reads `path`, which must be a regular file (a FIFO or a device is refused without reading
  // it, see common/mapped_file.h) of at most kMaxBytes. NotFound if it is missing; InvalidArgument if it
  // is not a regular file, is too large, is not longer than seq_len + 1 bytes, or seq_len <= 0.
  // Messages start with the path.
  // With a split, each part must be longer than seq_len + 1 bytes (InvalidArgument naming the
  // part otherwise).
  static absl::StatusOr<std::unique_ptr<TextDataset>> Open(const std::string& path, int seq_len,
                                                           uint64_t seed, Split split = Split::kAll);
  static absl::StatusOr<std::unique_ptr<TextDataset>> FromString(std::string text, int seq_len,
                                                                 uint64_t seed,
                                                                 Split split = Split::kAll);
  // The first byte of the held-out part of a text of `size` bytes.
  static int64_t ValidationStart(int64_t size) { return size - size / 10; }

  std::string name() const override { return "text:" + path_; }
  int vocab_size() const override { return 256; }
  int seq_len() const override { return seq_len_; }
  Microbatch Get(int64_t step, int microbatch, int microbatch_size) const override;
  int64_t size_bytes() const { return static_cast<int64_t>(text_.size()); }
  // The bytes windows are drawn from: [begin, end).
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 private:
  static absl::StatusOr<std::unique_ptr<TextDataset>> Make(std::string path, std::string text,
                                                           int seq_len, uint64_t seed, Split split);
  TextDataset(std::string path, std::string text, int seq_len, uint64_t seed, int64_t begin,
              int64_t end)
      : path_(std::move(path)),
        text_(std::move(text)),
        seq_len_(seq_len),
        seed_(seed),
        begin_(begin),
        end_(end) {}
  std::string path_;
  std::string text_;
  int seq_len_;
  uint64_t seed_;
  int64_t begin_;
  int64_t end_;
};

}  // namespace pipetrain::data

#endif  // PIPETRAIN_WORKER_DATA_TEXT_DATASET_H_
