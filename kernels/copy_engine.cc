#include "kernels/copy_engine.h"

#include <cstring>

namespace pipetrain::kernels {
namespace {

class MemcpyCopyEngine final : public CopyEngine {
 public:
  absl::StatusOr<std::unique_ptr<CopyFence>> FenceCompute() override { return nullptr; }
  absl::Status Copy(const CopyFence*, CopyDirection,
                    absl::Span<const CopySegment> segments) override {
    for (const CopySegment& s : segments) {
      if (s.bytes > 0) std::memcpy(s.dst, s.src, static_cast<size_t>(s.bytes));
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<CopyEngine> MakeMemcpyCopyEngine() { return std::make_unique<MemcpyCopyEngine>(); }

}  // namespace pipetrain::kernels
