// MappedFile: a regular file mapped read-only into memory, for the data readers (the workers'
// datasets, `pipetrain data prepare`'s input). Opening it never blocks and never reads unbounded
// input: the path must name a regular file (checked with stat before it is opened, then again on
// the opened descriptor), so a FIFO, a socket, a directory or a device such as /dev/zero is refused
// at once, and its size is known before anything is read. Also a bounded read into a string, for
// small side files.
//
// Errors carry the path and the problem: NotFound (missing), PermissionDenied, InvalidArgument
// (not a regular file, empty, over the caller's size limit) or Internal (a failed system call).
//
// Thread-safety: immutable after Open; its bytes may be read from any thread.
#ifndef PIPETRAIN_COMMON_MAPPED_FILE_H_
#define PIPETRAIN_COMMON_MAPPED_FILE_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"

namespace pipetrain {

class MappedFile {
 public:
  // Maps `path` (1..max_bytes bytes, see above).
  static absl::StatusOr<MappedFile> Open(const std::string& path,
                                         int64_t max_bytes = std::numeric_limits<int64_t>::max());

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const unsigned char* data() const { return data_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const unsigned char* data, int64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
};

// The contents of the regular file `path` (0..max_bytes bytes; the same checks as
// MappedFile::Open, but an empty file is allowed).
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes);

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_MAPPED_FILE_H_
