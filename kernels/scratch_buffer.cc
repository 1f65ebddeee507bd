#include "kernels/scratch_buffer.h"

#include "kernels/allocator.h"

namespace pipetrain::kernels {

ScratchBuffer::ScratchBuffer(ScratchBuffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), owner_(other.owner_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
  other.owner_ = nullptr;
}

ScratchBuffer& ScratchBuffer::operator=(ScratchBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = other.data_;
    bytes_ = other.bytes_;
    owner_ = other.owner_;
    other.data_ = nullptr;
    other.bytes_ = 0;
    other.owner_ = nullptr;
  }
  return *this;
}

void ScratchBuffer::Reset() {
  if (owner_ != nullptr) owner_->ReleaseScratch(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
  owner_ = nullptr;
}

}  // namespace pipetrain::kernels
