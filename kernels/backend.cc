#include "kernels/backend.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::kernels {

absl::StatusOr<Tensor> Backend::Empty(const Shape& shape, absl::string_view what) {
  return device_allocator().Allocate(shape, what);
}

absl::StatusOr<Tensor> Backend::Zeros(const Shape& shape, absl::string_view what) {
  PT_ASSIGN_OR_RETURN(Tensor t, device_allocator().Allocate(shape, what));
  PT_RETURN_IF_ERROR(Fill(0.0f, &t));
  return t;
}

absl::StatusOr<Tensor> Backend::FromHost(const Shape& shape, absl::Span<const float> values,
                                         absl::string_view what) {
  if (static_cast<int64_t>(values.size()) != NumElements(shape)) {
    return absl::InvalidArgumentError(absl::StrCat("FromHost(", what, "): ", values.size(),
                                                   " values for shape ", ShapeString(shape)));
  }
  PT_ASSIGN_OR_RETURN(Tensor t, device_allocator().Allocate(shape, what));
  PT_RETURN_IF_ERROR(Upload(values, &t));
  return t;
}

absl::StatusOr<std::vector<float>> Backend::ToVector(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.location() == Location::kHost) {
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.data()[i];
    return out;
  }
  PT_RETURN_IF_ERROR(Download(t, absl::MakeSpan(out)));
  return out;
}

}  // namespace pipetrain::kernels
