// Opens the "tokens" source's path (docs/data.md): either one token file, or a directory written
// by `pipetrain data prepare` (model/token_corpus.h): its train.bin is the training data, its
// val.bin (if present) must pass the same checks, and its meta.json (if present) must agree with
// what the spec declares (dtype, no larger vocabulary) and with the files (token counts), so a
// spec that reads uint32 ids as uint16, or a truncated file, fails here and not as silent noise.
//
// Thread-safety: a pure function; the datasets it returns are thread-safe.
#ifndef PIPETRAIN_WORKER_DATA_TOKEN_CORPUS_READER_H_
#define PIPETRAIN_WORKER_DATA_TOKEN_CORPUS_READER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/token_dataset.h"

namespace pipetrain::data {

struct TokenCorpus {
  std::unique_ptr<TokenDataset> train;
  std::unique_ptr<TokenDataset> val;  // null: no val.bin (or `path` is a single file)
};

// NotFound when `path` or a directory's train.bin is missing; otherwise the errors of
// TokenDataset::Open, or InvalidArgument for a meta.json that disagrees. Messages start with the
// file they are about (train.bin, val.bin or meta.json).
absl::StatusOr<TokenCorpus> OpenTokenCorpus(const std::string& path,
                                            const TokenDataset::Options& options);

}  // namespace pipetrain::data

#endif  // PIPETRAIN_WORKER_DATA_TOKEN_CORPUS_READER_H_
