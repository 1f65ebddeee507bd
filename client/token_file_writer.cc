#include "client/token_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"

namespace pipetrain::client {

absl::StatusOr<std::unique_ptr<TokenFileWriter>> TokenFileWriter::Create(const std::string& path,
                                                                         model::TokenDtype dtype) {
  std::string temp = absl::StrCat(path, ".tmp-", ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": cannot create: ", ErrnoText()));
  return std::unique_ptr<TokenFileWriter>(new TokenFileWriter(path, std::move(temp), fd, dtype));
}

TokenFileWriter::~TokenFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

absl::Status TokenFileWriter::Append(const std::vector<int>& ids) {
  const int width = model::TokenDtypeBytes(dtype_);
  const int64_t limit = int64_t{1} << (8 * width);
  buffer_.resize(ids.size() * static_cast<size_t>(width));
  unsigned char* p = buffer_.data();
  for (const int id : ids) {
    if (id < 0 || id >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": id ", id, " does not fit ", model::TokenDtypeName(dtype_)));
    }
    const uint32_t v = static_cast<uint32_t>(id);
    for (int b = 0; b < width; ++b) *p++ = static_cast<unsigned char>(v >> (8 * b));
  }
  const unsigned char* q = buffer_.data();
  size_t left = buffer_.size();
  while (left > 0) {
    const ssize_t w = ::write(fd_, q, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return absl::InternalError(absl::StrCat(path_, ": write: ", ErrnoText()));
    q += w;
    left -= static_cast<size_t>(w);
  }
  tokens_ += static_cast<int64_t>(ids.size());
  return absl::OkStatus();
}

absl::Status TokenFileWriter::Commit() {
  if (::fsync(fd_) != 0) return absl::InternalError(absl::StrCat(path_, ": fsync: ", ErrnoText()));
  ::close(fd_);
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": rename: ", ErrnoText()));
  }
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace pipetrain::client
