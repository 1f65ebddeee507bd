#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace pipetrain {

std::string ErrnoText() { return std::strerror(errno); }

absl::Status FsyncDirectory(const std::string& dir, const std::string& what) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return absl::InternalError(absl::StrCat(what, ": open directory ", dir, ": ", ErrnoText()));
  }
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(what, ": fsync directory ", dir, ": ", ErrnoText()));
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat(path, ": write: ", ErrnoText()));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(int fd)>& write_body) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  static std::atomic<int64_t> counter{0};
  const std::string temp = absl::StrCat(path, ".tmp-", ::getpid(), "-", counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": create ", temp, ": ", ErrnoText()));
  absl::Status status = write_body(fd);
  if (status.ok() && ::fsync(fd) != 0) {
    status = absl::InternalError(absl::StrCat(path, ": fsync: ", ErrnoText()));
  }
  if (::close(fd) != 0 && status.ok()) {
    status = absl::InternalError(absl::StrCat(path, ": close: ", ErrnoText()));
  }
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat(path, ": rename: ", ErrnoText()));
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  return FsyncDirectory(dir, path);
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  return WriteFileAtomically(
      path, [&](int fd) { return WriteAll(fd, contents.data(), contents.size(), path); });
}

}  // namespace pipetrain
