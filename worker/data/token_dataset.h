// TokenDataset: language modelling on a file of token ids (the "tokens" source; docs/data.md).
// The file is flat little-endian ids of one width (model::TokenDtype), memory-mapped read-only.
// Each sequence is a window of seq_len + 1 ids starting at an offset drawn deterministically
// from (seed, step, microbatch, sequence), like TextDataset: inputs are the first seq_len ids,
// targets the next ones. So every worker, the reference trainer and a resumed run see exactly the
// same microbatch for the same (step, microbatch).
//
// Open checks the whole file once: a regular file (common/mapped_file.h), not empty, a whole number
// of ids, at least one window long, and every id below the declared vocabulary.
//
// Thread-safety: immutable after Open; thread-safe.
#ifndef PIPETRAIN_WORKER_DATA_TOKEN_DATASET_H_
#define PIPETRAIN_WORKER_DATA_TOKEN_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/mapped_file.h"
#include "model/token_corpus.h"
#include "worker/data/dataset.h"

namespace pipetrain::data {

class TokenDataset : public Dataset {
 public:
  struct Options {
    model::TokenDtype dtype = model::TokenDtype::kUint16;
    int seq_len = 0;     // >= 1
    int vocab_size = 0;  // >= 1; every id in the file must be below it
    uint64_t seed = 0;
  };

  // Maps and checks `path` (see above). NotFound if it is missing, PermissionDenied if it cannot
  // be read, InvalidArgument for every other problem with the file or the options. Messages start
  // with the path; a bad id is reported with the number of such ids and the first one's offset.
  static absl::StatusOr<std::unique_ptr<TokenDataset>> Open(const std::string& path,
                                                            const Options& options);

  std::string name() const override { return "tokens:" + file_.path(); }
  int vocab_size() const override { return options_.vocab_size; }
  int seq_len() const override { return options_.seq_len; }
  Microbatch Get(int64_t step, int microbatch, int microbatch_size) const override;

  int64_t num_tokens() const { return num_tokens_; }
  // The id at index i (0 <= i < num_tokens()).
  int32_t token(int64_t i) const;

 private:
  TokenDataset(MappedFile file, const Options& options, int64_t num_tokens)
      : file_(std::move(file)), options_(options), num_tokens_(num_tokens) {}
  MappedFile file_;
  Options options_;
  int64_t num_tokens_;
};

}  // namespace pipetrain::data

#endif  // PIPETRAIN_WORKER_DATA_TOKEN_DATASET_H_
