// AllowedPaths: the directories a worker lets a job name. A job's paths (its training data, its
// checkpoint directory, a checkpoint to resume from) come over the network; a worker takes them
// only under the roots its operator gave it (pipetrain-worker --data-root / --checkpoint-root),
// compared after symlinks and ".." are resolved, so "../../etc/shadow" or a link out of the root
// is refused before anything is opened.
//
// What it does not stop: a path swapped for a symlink between the check and the open by someone
// who can already write inside the root (docs/security.md).
//
// Thread-safety: value type; the check reads the file system.
#ifndef PIPETRAIN_WORKER_RUNTIME_ALLOWED_PATHS_H_
#define PIPETRAIN_WORKER_RUNTIME_ALLOWED_PATHS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pipetrain::worker {

struct AllowedPaths {
  std::string data_root = "/";        // "/": any path
  std::string checkpoint_root = "/";  // "/": any path
};

// OK when `path` is empty or lies under `root` once both are resolved (symlinks of the existing
// part followed, "." and ".." removed, relative paths taken from the working directory); else
// PermissionDenied naming `field`, the path, what it resolved to and `flag` (the root's flag).
absl::Status CheckPathUnder(absl::string_view field, const std::string& path,
                            const std::string& root, absl::string_view flag);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_ALLOWED_PATHS_H_
