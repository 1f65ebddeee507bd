// The bearer token a gRPC call carries ("authorization: Bearer <token>" metadata), for the
// services that check one (docs/security.md).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COMMON_GRPC_AUTH_H_
#define PIPETRAIN_COMMON_GRPC_AUTH_H_

#include <grpcpp/server_context.h>

#include <optional>

#include "absl/strings/string_view.h"
#include "common/secret.h"

namespace pipetrain {

// nullopt when the call has no "authorization" metadata or it is not "Bearer <token>".
inline std::optional<absl::string_view> CallBearerToken(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  return BearerToken(absl::string_view(it->second.data(), it->second.size()));
}

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_GRPC_AUTH_H_
