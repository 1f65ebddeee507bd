#include "kernels/tensor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/allocator.h"

namespace pipetrain::kernels {

const char* LocationName(Location location) {
  return location == Location::kDevice ? "device" : "host";
}

const char* DTypeName(DType dtype) { return dtype == DType::kF32 ? "f32" : "bf16"; }

int64_t ElementBytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

Tensor::Tensor(Shape shape, float* data, Location location, DType dtype,
               CountingAllocator* owner)
    : shape_(std::move(shape)),
      numel_(NumElements(shape_)),
      data_(data),
      location_(location),
      dtype_(dtype),
      owner_(owner) {}

Tensor::Tensor(Tensor&& other) noexcept
    : shape_(std::move(other.shape_)),
      numel_(other.numel_),
      data_(other.data_),
      location_(other.location_),
      dtype_(other.dtype_),
      owner_(other.owner_) {
  other.owner_ = nullptr;
  other.data_ = nullptr;
  other.numel_ = 0;
  other.shape_.clear();
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    Reset();
    shape_ = std::move(other.shape_);
    numel_ = other.numel_;
    data_ = other.data_;
    location_ = other.location_;
    dtype_ = other.dtype_;
    owner_ = other.owner_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.numel_ = 0;
    other.shape_.clear();
  }
  return *this;
}

int64_t Tensor::dim(int i) const {
  if (i < 0) i += rank();
  return shape_.at(static_cast<size_t>(i));
}

bool Tensor::Reshape(Shape shape) {
  if (NumElements(shape) != numel_) return false;
  shape_ = std::move(shape);
  return true;
}

void Tensor::Reset() {
  if (owner_ != nullptr) owner_->Release(data_, bytes());
  owner_ = nullptr;
  data_ = nullptr;
  numel_ = 0;
  shape_.clear();
}

std::string Tensor::DebugString() const {
  if (empty()) return "Tensor(empty)";
  return absl::StrCat("Tensor(", ShapeString(shape_), ", ", LocationName(location_),
                      dtype_ == DType::kF32 ? "" : ", bf16", ")");
}

}  // namespace pipetrain::kernels
