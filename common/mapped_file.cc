#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pipetrain {
namespace {

std::string FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status ErrnoStatus(const std::string& path, const char* call, int err) {
  const std::string why = std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be read (", why, ")"));
  }
  return absl::InternalError(absl::StrCat(path, ": ", call, " failed: ", why));
}

absl::Status CheckRegular(const std::string& path, const struct stat& st, int64_t max_bytes) {
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is ", FileKind(st.st_mode), ", not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": has ", st.st_size, " bytes, more than the limit of ", max_bytes, " bytes"));
  }
  return absl::OkStatus();
}

// Opens a regular file of at most max_bytes for reading: stat first (a FIFO is never opened),
// then open without blocking and check the descriptor again (the path may have changed).
absl::StatusOr<int> OpenRegular(const std::string& path, int64_t max_bytes, int64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, "stat", errno);
  if (absl::Status s = CheckRegular(path, st, max_bytes); !s.ok()) return s;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, "open", errno);
  absl::Status checked =
      ::fstat(fd, &st) == 0 ? CheckRegular(path, st, max_bytes) : ErrnoStatus(path, "fstat", errno);
  if (!checked.ok()) {
    ::close(fd);
    return checked;
  }
  *size = st.st_size;
  return fd;
}

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path, int64_t max_bytes) {
  int64_t size = 0;
  absl::StatusOr<int> fd = OpenRegular(path, max_bytes, &size);
  if (!fd.ok()) return fd.status();
  if (size == 0) {
    ::close(*fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": is empty"));
  }
  void* data = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, *fd, 0);
  const int err = errno;
  ::close(*fd);  // the mapping keeps the file
  if (data == MAP_FAILED) return ErrnoStatus(path, "mmap", err);
  return MappedFile(path, static_cast<const unsigned char*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(size_));
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(size_));
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes) {
  int64_t size = 0;
  absl::StatusOr<int> fd = OpenRegular(path, max_bytes, &size);
  if (!fd.ok()) return fd.status();
  std::string out(static_cast<size_t>(size), '\0');
  int64_t done = 0;
  while (done < size) {  // a file that shrank meanwhile ends the read early
    const ssize_t n = ::read(*fd, out.data() + done, static_cast<size_t>(size - done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(*fd);
      return ErrnoStatus(path, "read", err);
    }
    if (n == 0) break;
    done += n;
  }
  ::close(*fd);
  out.resize(static_cast<size_t>(done));
  return out;
}

}  // namespace pipetrain
