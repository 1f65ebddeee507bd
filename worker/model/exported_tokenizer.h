// The tokenizer an exported model names in its metadata (model/exported_model.h), for
// `pipetrain generate`: text <-> ids.
//   "chars"          token i is the i-th character of the recorded vocabulary (addition task)
//   "bytes"          token i is byte i (the "text" source)
//   "sentencepiece"  a tokenizer.model (beside the weights, or --tokenizer), applied by
//                    `pipetrain-data encode|decode` in a child process: libsentencepiece may not
//                    share a process with the libprotobuf this one links
// Ids the tokenizer has no text for (a model vocabulary larger than the tokenizer's) decode as
// "<id>".
//
// Thread-safety: not thread-safe.
#ifndef PIPETRAIN_WORKER_MODEL_EXPORTED_TOKENIZER_H_
#define PIPETRAIN_WORKER_MODEL_EXPORTED_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/safetensors.h"

namespace pipetrain::model {

class ExportedTokenizer {
 public:
  // The tokenizer of `weights`. `tokenizer_path`: the SentencePiece model to use (empty: the
  // tokenizer.model beside the weights); `data_tool`: the pipetrain-data binary (empty: found
  // beside this executable, in the build tree or on PATH). Errors name the flag (--weights,
  // --tokenizer): a missing or unknown tokenizer, a tokenizer.model whose CRC-32 is not the one
  // the export recorded.
  static absl::StatusOr<std::unique_ptr<ExportedTokenizer>> ForModel(
      const SafetensorsFile& weights, const std::string& tokenizer_path,
      const std::string& data_tool);
  virtual ~ExportedTokenizer() = default;

  // "chars", "bytes" or "sentencepiece".
  virtual std::string kind() const = 0;
  // InvalidArgument naming --prompt for text the tokenizer cannot encode.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) = 0;
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) = 0;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_EXPORTED_TOKENIZER_H_
