// Files that a crash never leaves half-written: write a temp file beside the destination, fsync
// it, rename it over the destination, fsync the directory. A reader sees the old file or the
// complete new one; a writer killed mid-way leaves only a "<path>.tmp-<pid>..." file behind.
//
// Thread-safety: free functions; concurrent writers of one path must be serialised by the
// caller (the last rename wins).
#ifndef PIPETRAIN_COMMON_ATOMIC_FILE_H_
#define PIPETRAIN_COMMON_ATOMIC_FILE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace pipetrain {

// Writes `contents` to `path` atomically (see above). Internal errors name the path and the
// failing call.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

// The same for a body written in pieces: `write_body` gets the temp file's descriptor (and
// writes with WriteAll); an error from it leaves `path` untouched and is returned.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(int fd)>& write_body);

// Writes all `n` bytes to `fd` (retrying short writes and EINTR); errors name `path`.
absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path);

// fsync of a directory, so a rename inside it survives a power loss. `what` names the file the
// caller is committing, for the error message.
absl::Status FsyncDirectory(const std::string& dir, const std::string& what);

// strerror(errno), for messages.
std::string ErrnoText();

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_ATOMIC_FILE_H_
