#include "common/secret.h"

#include <sys/random.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pipetrain {

absl::StatusOr<std::string> LoadSecret(const std::string& file, const char* env_var,
                                       absl::string_view flag) {
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", file));
    std::ostringstream text;
    text << in.rdbuf();
    std::string secret(absl::StripAsciiWhitespace(text.str()));
    if (secret.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", file, " is empty"));
    }
    return secret;
  }
  const char* value = std::getenv(env_var);
  return std::string(value == nullptr ? "" : absl::StripAsciiWhitespace(value));
}

std::string RandomToken() {
  char bytes[32];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);  // EINTR: try again
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::optional<absl::string_view> BearerToken(absl::string_view authorization) {
  constexpr absl::string_view kBearer = "Bearer ";  // the scheme is case-insensitive (RFC 7235)
  if (!absl::StartsWithIgnoreCase(authorization, kBearer)) return std::nullopt;
  return authorization.substr(kBearer.size());
}

}  // namespace pipetrain
