#include "kernels/allocator.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pipetrain::kernels {
namespace {

class AlignedHostMemory : public RawMemory {
 public:
  void* Allocate(size_t bytes) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  }
  void Free(void* ptr, size_t) override { std::free(ptr); }
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
                            << " live tensors or scratch buffers (" << current_bytes_ << " bytes)";
}

absl::Status CountingAllocator::Reserve(int64_t bytes, bool scratch, absl::string_view what) {
  absl::MutexLock lock(&mu_);
  if (bytes > budget_bytes_ - current_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, ": allocating ", bytes, " bytes for ", what, " would exceed the budget of ",
        budget_bytes_, " bytes (", current_bytes_, " in use, ", scratch_bytes_, " of it scratch)"));
  }
  current_bytes_ += bytes;
  if (scratch) scratch_bytes_ += bytes;
  if (current_bytes_ > peak_bytes_) peak_bytes_ = current_bytes_;
  ++live_;
  return absl::OkStatus();
}

void CountingAllocator::Unreserve(int64_t bytes, bool scratch) {
  absl::MutexLock lock(&mu_);
  current_bytes_ -= bytes;
  if (scratch) scratch_bytes_ -= bytes;
  --live_;
}

absl::StatusOr<Tensor> CountingAllocator::Allocate(const Shape& shape, absl::string_view what,
                                                   DType dtype) {
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension in shape ", ShapeString(shape), " for ", what));
    }
  }
  const int64_t bytes = NumElements(shape) * ElementBytes(dtype);
  const std::string label = absl::StrCat(what, " ", ShapeString(shape));
  PT_RETURN_IF_ERROR(Reserve(bytes, /*scratch=*/false, label));
  void* ptr = raw_->Allocate(static_cast<size_t>(bytes));
  if (ptr == nullptr) {
    Unreserve(bytes, /*scratch=*/false);
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": out of memory allocating ", bytes, " bytes for ", label));
  }
  return Tensor(shape, static_cast<float*>(ptr), location_, dtype, this);
}

absl::StatusOr<ScratchBuffer> CountingAllocator::AllocateScratch(int64_t bytes,
                                                                 absl::string_view op) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative scratch size ", bytes, " for ", op));
  }
  const std::string label = absl::StrCat("scratch of ", op);
  PT_RETURN_IF_ERROR(Reserve(bytes, /*scratch=*/true, label));
  void* ptr = raw_->Allocate(static_cast<size_t>(bytes));
  if (ptr == nullptr) {
    Unreserve(bytes, /*scratch=*/true);
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": out of memory allocating ", bytes, " bytes for ", label));
  }
  return ScratchBuffer(ptr, bytes, this);
}

void CountingAllocator::Release(float* data, int64_t bytes) {
  if (data != nullptr) raw_->Free(data, static_cast<size_t>(bytes));
  Unreserve(bytes, /*scratch=*/false);
}

void CountingAllocator::ReleaseScratch(void* data, int64_t bytes) {
  if (data != nullptr) raw_->Free(data, static_cast<size_t>(bytes));
  Unreserve(bytes, /*scratch=*/true);
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
int64_t CountingAllocator::scratch_bytes() const {
  absl::MutexLock lock(&mu_);
  return scratch_bytes_;
}
MemoryStats CountingAllocator::stats() const {
  absl::MutexLock lock(&mu_);
  return MemoryStats{current_bytes_, peak_bytes_, scratch_bytes_, budget_bytes_, live_};
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
