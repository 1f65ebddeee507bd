// Secrets of the control plane (docs/security.md): the cluster secret an operator gives every
// daemon, the random tokens the coordinator issues, and how a call carries them
// ("authorization: Bearer <token>" gRPC metadata).
//
// Thread-safety: pure functions (LoadSecret reads a file or the environment; RandomToken reads
// the kernel's random source).
#ifndef PIPETRAIN_COMMON_SECRET_H_
#define PIPETRAIN_COMMON_SECRET_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pipetrain {

// The secret in `file` (surrounding whitespace stripped) if `file` is set, else the value of the
// environment variable `env_var` (never a command-line value: argv is visible to every user of
// the machine); "" when neither is set. An unreadable or empty file is an error naming `flag`.
absl::StatusOr<std::string> LoadSecret(const std::string& file, const char* env_var,
                                       absl::string_view flag);

// 32 bytes from the kernel's random source, as 64 hex digits.
std::string RandomToken();

// Equal, in time that depends only on the lengths (no early exit on the first difference).
bool SameSecret(absl::string_view a, absl::string_view b);

// The token of an "authorization" metadata value "Bearer <token>" (the scheme case-insensitive);
// nullopt for any other form.
std::optional<absl::string_view> BearerToken(absl::string_view authorization);

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_SECRET_H_
