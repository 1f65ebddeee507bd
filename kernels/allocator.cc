#include "kernels/allocator.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pipetrain::kernels {
namespace {

class AlignedHostMemory : public RawMemory {
 public:
  void* Allocate(size_t bytes) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  }
  void Free(void* ptr) override { std::free(ptr); }
};

}  // namespace

std::unique_ptr<RawMemory> MakeAlignedHostMemory() { return std::make_unique<AlignedHostMemory>(); }

CountingAllocator::CountingAllocator(std::string name, Location location,
                                     std::unique_ptr<RawMemory> raw, int64_t budget_bytes)
    : name_(std::move(name)),
      location_(location),
      raw_(std::move(raw)),
      budget_bytes_(budget_bytes) {}

CountingAllocator::~CountingAllocator() {
  absl::MutexLock lock(&mu_);
  LOG_IF(ERROR, live_ != 0) << "allocator " << name_ << " destroyed with " << live_
                            << " live tensors (" << current_bytes_ << " bytes)";
}

absl::StatusOr<Tensor> CountingAllocator::Allocate(const Shape& shape, absl::string_view what) {
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension in shape ", ShapeString(shape), " for ", what));
    }
  }
  const int64_t bytes = NumElements(shape) * static_cast<int64_t>(sizeof(float));
  {
    absl::MutexLock lock(&mu_);
    if (bytes > budget_bytes_ - current_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          name_, ": allocating ", bytes, " bytes for ", what, " ", ShapeString(shape),
          " would exceed the budget of ", budget_bytes_, " bytes (", current_bytes_, " in use)"));
    }
    current_bytes_ += bytes;
    if (current_bytes_ > peak_bytes_) peak_bytes_ = current_bytes_;
    ++live_;
  }
  void* ptr = raw_->Allocate(static_cast<size_t>(bytes));
  if (ptr == nullptr) {
    Release(nullptr, bytes);
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": out of memory allocating ", bytes,
                                                     " bytes for ", what, " ", ShapeString(shape)));
  }
  return Tensor(shape, static_cast<float*>(ptr), location_, this);
}

void CountingAllocator::Release(float* data, int64_t bytes) {
  if (data != nullptr) raw_->Free(data);
  absl::MutexLock lock(&mu_);
  current_bytes_ -= bytes;
  --live_;
}

int64_t CountingAllocator::current_bytes() const {
  absl::MutexLock lock(&mu_);
  return current_bytes_;
}
int64_t CountingAllocator::peak_bytes() const {
  absl::MutexLock lock(&mu_);
  return peak_bytes_;
}
int64_t CountingAllocator::budget_bytes() const {
  absl::MutexLock lock(&mu_);
  return budget_bytes_;
}
int64_t CountingAllocator::live_allocations() const {
  absl::MutexLock lock(&mu_);
  return live_;
}
void CountingAllocator::set_budget_bytes(int64_t budget_bytes) {
  absl::MutexLock lock(&mu_);
  budget_bytes_ = budget_bytes;
}
void CountingAllocator::ResetPeak() {
  absl::MutexLock lock(&mu_);
  peak_bytes_ = current_bytes_;
}

}  // namespace pipetrain::kernels
