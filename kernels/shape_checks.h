// Argument validation shared by the backends: location and shape checks that turn a programmer or
// protocol error into an InvalidArgument status naming the op and the offending tensor.
// Thread-safety: pure functions.
#ifndef PIPETRAIN_KERNELS_SHAPE_CHECKS_H_
#define PIPETRAIN_KERNELS_SHAPE_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/tensor.h"

namespace pipetrain::kernels {

// Last dimension (1 for a rank-0 tensor).
int64_t Cols(const Tensor& t);
// Product of all but the last dimension.
int64_t Rows(const Tensor& t);

// Non-empty and on the device.
absl::Status CheckDevice(absl::string_view op, absl::string_view arg, const Tensor& t);
// CheckDevice plus Rows == rows and Cols == cols (a negative expectation is not checked).
absl::Status CheckMatrix(absl::string_view op, absl::string_view arg, const Tensor& t, int64_t rows,
                         int64_t cols);
// CheckDevice plus numel == n.
absl::Status CheckNumel(absl::string_view op, absl::string_view arg, const Tensor& t, int64_t n);

// Every id in [0, limit) (kIgnoreTarget = -1 also allowed when allow_ignore).
absl::Status CheckIds(absl::string_view op, absl::Span<const int32_t> ids, int64_t limit,
                      bool allow_ignore);

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_SHAPE_CHECKS_H_
