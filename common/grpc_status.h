// Conversion between absl::Status and grpc::Status: the one place per process edge where one
// becomes the other (the codes are numerically identical by design).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_COMMON_GRPC_STATUS_H_
#define PIPETRAIN_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace pipetrain {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_GRPC_STATUS_H_
