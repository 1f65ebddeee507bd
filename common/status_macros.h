// Status propagation helpers for absl::Status / absl::StatusOr code.
// Thread-safety: macros only; no state.
#ifndef PIPETRAIN_COMMON_STATUS_MACROS_H_
#define PIPETRAIN_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define PT_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::absl::Status pt_status_ = (expr);           \
    if (!pt_status_.ok()) return pt_status_;      \
  } while (0)

#define PT_CONCAT_INNER_(a, b) a##b
#define PT_CONCAT_(a, b) PT_CONCAT_INNER_(a, b)

// `PT_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define PT_ASSIGN_OR_RETURN(lhs, expr) \
  PT_ASSIGN_OR_RETURN_IMPL_(PT_CONCAT_(pt_statusor_, __LINE__), lhs, expr)
#define PT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // PIPETRAIN_COMMON_STATUS_MACROS_H_
