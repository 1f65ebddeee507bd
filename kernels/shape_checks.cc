#include "kernels/shape_checks.h"

#include "absl/strings/str_cat.h"

namespace pipetrain::kernels {

int64_t Cols(const Tensor& t) { return t.rank() == 0 ? 1 : t.shape().back(); }

int64_t Rows(const Tensor& t) {
  const int64_t c = Cols(t);
  return c == 0 ? 0 : t.numel() / c;
}

absl::Status CheckDevice(absl::string_view op, absl::string_view arg, const Tensor& t) {
  if (t.empty()) return absl::InvalidArgumentError(absl::StrCat(op, ": ", arg, " is empty"));
  if (t.location() != Location::kDevice) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " is a host tensor (reload it to the device first)"));
  }
  if (t.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " is a ", DTypeName(t.dtype()), " tensor (compute takes f32: ToF32 first)"));
  }
  return absl::OkStatus();
}

absl::Status CheckMatrix(absl::string_view op, absl::string_view arg, const Tensor& t, int64_t rows,
                         int64_t cols) {
  absl::Status s = CheckDevice(op, arg, t);
  if (!s.ok()) return s;
  if ((rows >= 0 && Rows(t) != rows) || (cols >= 0 && Cols(t) != cols)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", arg, " has shape ",
                                                   ShapeString(t.shape()), ", want [", rows, ",",
                                                   cols, "] (as rows x last dim)"));
  }
  return absl::OkStatus();
}

absl::Status CheckNumel(absl::string_view op, absl::string_view arg, const Tensor& t, int64_t n) {
  absl::Status s = CheckDevice(op, arg, t);
  if (!s.ok()) return s;
  if (t.numel() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " has ", t.numel(), " elements, want ", n));
  }
  return absl::OkStatus();
}

absl::Status CheckIds(absl::string_view op, absl::Span<const int32_t> ids, int64_t limit,
                      bool allow_ignore) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (allow_ignore && ids[i] == -1) continue;
    if (ids[i] < 0 || ids[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": id ", ids[i], " at position ", i, " is outside [0, ", limit, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::kernels
