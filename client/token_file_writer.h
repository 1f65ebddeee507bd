// TokenFileWriter: streams token ids into a token file (model/token_corpus.h: flat little-endian
// ids of one width). It writes `<path>.tmp-<pid>` and renames it over `path` on Commit, so a run
// that dies half-way never leaves a short file under the final name; an uncommitted writer
// removes its temp file.
//
// Thread-safety: not thread-safe (one writer per file).
#ifndef PIPETRAIN_CLIENT_TOKEN_FILE_WRITER_H_
#define PIPETRAIN_CLIENT_TOKEN_FILE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/token_corpus.h"

namespace pipetrain::client {

class TokenFileWriter {
 public:
  // Internal error naming the file when it cannot be created.
  static absl::StatusOr<std::unique_ptr<TokenFileWriter>> Create(const std::string& path,
                                                                 model::TokenDtype dtype);
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  ~TokenFileWriter();

  // Appends `ids`; InvalidArgument if one does not fit the dtype (nothing of `ids` is written).
  absl::Status Append(const std::vector<int>& ids);
  // Flushes, fsyncs and renames the file into place.
  absl::Status Commit();
  int64_t tokens() const { return tokens_; }

 private:
  TokenFileWriter(std::string path, std::string temp, int fd, model::TokenDtype dtype)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd), dtype_(dtype) {}
  std::string path_;
  std::string temp_;
  int fd_;
  model::TokenDtype dtype_;
  int64_t tokens_ = 0;
  bool committed_ = false;
  std::vector<unsigned char> buffer_;
};

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_TOKEN_FILE_WRITER_H_
