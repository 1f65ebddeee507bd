// The one boundary to Debian's libsentencepiece (0.1.97): train a subword model from sentences,
// then encode text to ids and decode ids to text with it.
//
// Two rules keep that library apart from the rest of pipetrain:
// - Its headers declare `absl::string_view` as std::string_view, which clashes with Debian's
//   abseil (its own string_view class), so only sentencepiece_tokenizer.cc includes them and
//   this header speaks standard C++ only: errors are returned as message strings, "" for success.
// - libsentencepiece carries its own copy of protobuf-lite and exports its symbols, so it must
//   never share a process with libprotobuf: only the `pipetrain-data` binary links this
//   (scripts/check_layering.sh checks that binary links no libprotobuf).
//
// The models are lossless: identity normalisation, no whitespace folding, no dummy prefix, and
// byte fallback for every character outside the vocabulary, so Decode(Encode(text)) == text for
// any UTF-8 text, and encoding a text in pieces cut at line ends gives the ids of the whole.
//
// Thread-safety: TrainTokenizer is not reentrant (the library trains with global state); a
// loaded Tokenizer is immutable and its Encode/Decode may run concurrently.
#ifndef PIPETRAIN_CLIENT_SENTENCEPIECE_TOKENIZER_H_
#define PIPETRAIN_CLIENT_SENTENCEPIECE_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pipetrain::client {

// Training sentences, one per call; the views stay valid until the next call.
class SentenceSource {
 public:
  virtual ~SentenceSource() = default;
  // False once there are no more.
  virtual bool Next(std::string_view* sentence) = 0;
};

struct TokenizerTrainOptions {
  std::string model_type = "bpe";  // "bpe" or "unigram"
  int vocab_size = 0;
  int threads = 1;
  // Longest sentence the trainer takes, in bytes (longer ones are skipped: cut them before).
  int max_sentence_bytes = 4192;
};

// Trains a model on all of `source`'s sentences (the caller bounds them: the trainer holds them
// in memory) and stores its serialized form in `model`; the same sentences and options give the
// same model. Returns "" or the library's error message.
std::string TrainTokenizer(const TokenizerTrainOptions& options, SentenceSource* source,
                           std::string* model);

class Tokenizer {
 public:
  // From a serialized model (TrainTokenizer's output, or a tokenizer.model file's bytes). Null
  // with `error` set when it is not a model.
  static std::unique_ptr<Tokenizer> FromSerialized(const std::string& model, std::string* error);
  virtual ~Tokenizer() = default;

  virtual int vocab_size() const = 0;
  // Appends the ids of `text` to `ids`; returns "" or the error.
  virtual std::string Encode(std::string_view text, std::vector<int>* ids) const = 0;
  // The text of `ids`; returns "" or the error.
  virtual std::string Decode(const std::vector<int>& ids, std::string* text) const = 0;
};

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_SENTENCEPIECE_TOKENIZER_H_
