// Tensor: a contiguous, row-major array with a shape, living either in a backend's device
// memory or in host memory. Compute works on fp32 tensors; bf16 tensors only hold activations
// stashed between passes in a bf16 job (Backend::ToBf16 / ToF32 convert, offload moves them). Its storage is owned (move-only) and was obtained from a
// CountingAllocator, to which it is returned when the tensor is destroyed or reset; the allocator
// must outlive every tensor it produced.
// Thread-safety: a Tensor is a plain value; concurrent reads are safe, writes need external sync.
#ifndef PIPETRAIN_KERNELS_TENSOR_H_
#define PIPETRAIN_KERNELS_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain::kernels {

class CountingAllocator;

// Where a tensor's bytes are. For the CPU backend "device" memory is ordinary host RAM that is
// accounted as the worker's device memory; host tensors are what activations are offloaded to.
enum class Location { kDevice, kHost };

const char* LocationName(Location location);

// Element type. kBF16 stores the upper 16 bits of the fp32 value (rounded to nearest even).
enum class DType { kF32, kBF16 };

const char* DTypeName(DType dtype);
int64_t ElementBytes(DType dtype);

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for a scalar shape {}).
int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  ~Tensor() { Reset(); }
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // True when the tensor holds no allocation (default-constructed, moved-from or reset).
  bool empty() const { return owner_ == nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // Size of dimension i; negative i counts from the back (-1 = last).
  int64_t dim(int i) const;
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * ElementBytes(dtype_); }
  Location location() const { return location_; }
  DType dtype() const { return dtype_; }
  // Raw pointer into the tensor's memory (a device pointer for CUDA device tensors); the
  // elements are floats only for kF32 (a kBF16 tensor's are uint16_t: use raw()).
  float* data() { return data_; }
  const float* data() const { return data_; }
  void* raw() { return data_; }
  const void* raw() const { return data_; }

  // Changes the shape without touching data; `shape` must have the same number of elements.
  // Returns false (and changes nothing) otherwise.
  bool Reshape(Shape shape);
  // Releases the storage back to its allocator; the tensor becomes empty.
  void Reset();
  std::string DebugString() const;

 private:
  friend class CountingAllocator;
  Tensor(Shape shape, float* data, Location location, DType dtype, CountingAllocator* owner);

  Shape shape_;
  int64_t numel_ = 0;
  float* data_ = nullptr;
  Location location_ = Location::kDevice;
  DType dtype_ = DType::kF32;
  CountingAllocator* owner_ = nullptr;
};

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_TENSOR_H_
