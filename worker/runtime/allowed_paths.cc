#include "worker/runtime/allowed_paths.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

absl::Status CheckPathUnder(absl::string_view field, const std::string& path,
                            const std::string& root, absl::string_view flag) {
  if (path.empty()) return absl::OkStatus();
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path resolved_root = fs::weakly_canonical(fs::absolute(root, error), error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": cannot resolve ", root, ": ", error.message()));
  }
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot resolve ", path, ": ", error.message()));
  }
  // Under the root: every component of the root is a prefix of the path's.
  auto r = resolved_root.begin(), p = resolved.begin();
  for (; r != resolved_root.end() && !r->empty(); ++r, ++p) {
    if (p == resolved.end() || *p != *r) {
      return absl::PermissionDeniedError(absl::StrCat(
          field, ": ", path, " (resolved: ", resolved.string(), ") is outside this worker's ",
          flag, " ", resolved_root.string()));
    }
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::worker
