// `pipetrain data encode|decode`: a SentencePiece tokenizer.model applied to text or ids, for
// programs that must not link libsentencepiece themselves (it may not share a process with
// libprotobuf; client/sentencepiece_tokenizer.h). `pipetrain generate` encodes its prompt and
// decodes the sampled ids through these.
//
//   encode: the ids of `text`, space-separated, on one line
//   decode: the text of `ids` (space-separated decimal ids), exactly, without a newline
//
// Errors: InvalidArgument naming the flag (an unreadable or invalid --tokenizer, a bad id).
// Thread-safety: free functions.
#ifndef PIPETRAIN_CLIENT_TOKENIZE_COMMAND_H_
#define PIPETRAIN_CLIENT_TOKENIZE_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace pipetrain::client {

absl::Status EncodeCommand(const std::string& tokenizer, const std::string& text,
                           std::ostream& out);
absl::Status DecodeCommand(const std::string& tokenizer, const std::string& ids,
                           std::ostream& out);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_TOKENIZE_COMMAND_H_
