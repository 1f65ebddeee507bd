// `pipetrain data prepare`: turns a text corpus into the "tokens" source's directory
// (model/token_corpus.h, docs/data.md). It trains a SentencePiece model (BPE by default) on the
// corpus's training part, encodes the whole corpus with it and writes
//
//   <output>/train.bin        the ids of the text before the validation part
//   <output>/val.bin          the ids of the last --val-fraction of the text (from a line start)
//   <output>/tokenizer.model  the SentencePiece model
//   <output>/meta.json        dtype, vocabulary size, token counts, the input's name and size
//
// with uint16 ids when the vocabulary has at most 65536 entries, else uint32; meta.json is
// written last (and removed first), so it marks a complete directory. Then it prints the
// job-file snippet that trains on the directory.
//
// This library (and the `pipetrain-data` binary, the only one linking it) must never link
// protobuf: see client/sentencepiece_tokenizer.h.
//
// Thread-safety: PrepareData is not reentrant (the tokenizer trainer has global state).
#ifndef PIPETRAIN_CLIENT_DATA_PREPARE_H_
#define PIPETRAIN_CLIENT_DATA_PREPARE_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/token_corpus.h"

namespace pipetrain::client {

// The --vocab-size range: 256 byte-fallback pieces, 3 special ids and at least one merge; at most
// what a job accepts (planner::kMaxVocab).
inline constexpr int kMinPrepareVocab = 260;
inline constexpr int kMaxPrepareVocab = 1 << 22;

struct DataPrepareOptions {
  std::string input;               // --input: the corpus, UTF-8 text (a regular file)
  std::string output;              // --output: the directory to write (created if missing)
  int vocab_size = 0;              // --vocab-size
  double val_fraction = 0.01;      // --val-fraction: 0 <= f <= 0.5; 0 writes no val.bin
  std::string model_type = "bpe";  // --model-type: bpe or unigram
  int threads = 0;                 // --threads: 0 = the machine's hardware threads
  // Not flags. Inputs at least this large print encoding progress lines.
  int64_t progress_min_bytes = int64_t{16} << 20;
  // The tokenizer trains on at most this much of the training text (evenly spread samples of
  // whole lines), which bounds the trainer's memory; all of the text is encoded.
  int64_t tokenizer_sample_bytes = int64_t{64} << 20;
  // The text is encoded in pieces of about this size, `threads` at a time.
  int64_t encode_chunk_bytes = int64_t{1} << 20;
};

// What PrepareData wrote (the contents of meta.json).
struct PreparedData {
  std::string dir;  // absolute
  std::string input_name;
  int64_t input_bytes = 0;
  int64_t val_start_byte = 0;  // the validation text is the input's [val_start_byte, end)
  std::string model_type;
  int vocab_size = 0;
  model::TokenDtype dtype = model::TokenDtype::kUint16;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;  // 0: no val.bin
};

// InvalidArgument naming the flag and its allowed values for the first bad one.
absl::Status ValidateDataPrepareOptions(const DataPrepareOptions& options);

// Where the last `fraction` of `text` begins: the first line start at or after
// size * (1 - fraction); without one, that offset moved forward to a UTF-8 character start.
// text.size() (no validation text) when fraction is 0 or nothing is left after the cut.
int64_t ValidationStart(std::string_view text, double fraction);

// Does the work (see above); encoding progress goes to `progress`. Errors: InvalidArgument naming
// the flag (bad flags, an unreadable or empty --input, a --vocab-size the corpus cannot give),
// Internal for files that cannot be written.
absl::StatusOr<PreparedData> PrepareData(const DataPrepareOptions& options, std::ostream& progress);

// The YAML lines of a job file that train on `data` (model.vocab_size and training.data).
std::string JobFileSnippet(const PreparedData& data);

// PrepareData, then a summary and JobFileSnippet on `out`.
absl::Status DataPrepareCommand(const DataPrepareOptions& options, std::ostream& out,
                                std::ostream& err);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_DATA_PREPARE_H_
