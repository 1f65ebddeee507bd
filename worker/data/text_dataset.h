// TextDataset: byte-level language modelling on any file (vocabulary = 256 byte values). Each
// sequence is a window of seq_len + 1 bytes starting at an offset drawn deterministically from
// (seed, step, microbatch, sequence); inputs are the first seq_len bytes, targets the next ones.
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
  static absl::StatusOr<std::unique_ptr<TextDataset>> Open(const std::string& path, int seq_len,
                                                           uint64_t seed);
  static std::unique_ptr<TextDataset> FromString(std::string text, int seq_len, uint64_t seed);

  std::string name() const override { return "text:" + path_; }
  int vocab_size() const override { return 256; }
  int seq_len() const override { return seq_len_; }
  Microbatch Get(int64_t step, int microbatch, int microbatch_size) const override;
  int64_t size_bytes() const { return static_cast<int64_t>(text_.size()); }

 private:
  TextDataset(std::string path, std::string text, int seq_len, uint64_t seed)
      : path_(std::move(path)), text_(std::move(text)), seq_len_(seq_len), seed_(seed) {}
  std::string path_;
  std::string text_;
  int seq_len_;
  uint64_t seed_;
};

}  // namespace pipetrain::data

#endif  // PIPETRAIN_WORKER_DATA_TEXT_DATASET_H_
