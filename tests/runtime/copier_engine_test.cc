// ActivationCopier drives its backend's copy engines (kernels/copy_engine.h) as the CUDA backend
// needs: one engine per copy thread (two when duplex: separate D2H and H2D streams on a GPU), a
// fence taken at issue on the issuing (executor) thread after the destination exists, the copy
// on the copy thread with that fence and the right direction. Checked on the CPU with a
// CpuBackend whose engines record what they are asked to do.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "kernels/copy_engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/runtime/activation_copier.h"

namespace pipetrain::worker {
namespace {

using kernels::CopyDirection;

struct Record {
  std::string what;  // "fence" or "copy"
  int engine = -1;
  std::thread::id thread;
  const kernels::CopyFence* fence = nullptr;
  CopyDirection direction = CopyDirection::kDeviceToHost;
  int64_t device_bytes = 0;  // the device allocator's bytes in use at that moment
};

class RecordingBackend : public kernels::CpuBackend {
 public:
  absl::StatusOr<std::unique_ptr<kernels::CopyEngine>> NewCopyEngine() override;

  std::vector<Record> records() const {
    absl::MutexLock lock(&mu_);
    return records_;
  }
  void Add(Record r) {
    absl::MutexLock lock(&mu_);
    records_.push_back(std::move(r));
  }
  int engines_made = 0;
  absl::Status engine_error;  // when set, NewCopyEngine fails with it

 private:
  mutable absl::Mutex mu_;
  std::vector<Record> records_;
};

class RecordingEngine : public kernels::CopyEngine {
 public:
  RecordingEngine(RecordingBackend* backend, int id) : backend_(backend), id_(id) {}
  absl::StatusOr<std::unique_ptr<kernels::CopyFence>> FenceCompute() override {
    auto fence = std::make_unique<kernels::CopyFence>();
    backend_->Add({"fence", id_, std::this_thread::get_id(), fence.get(),
                   CopyDirection::kDeviceToHost, backend_->device_allocator().current_bytes()});
    return fence;
  }
  absl::Status Copy(const kernels::CopyFence* fence, CopyDirection direction,
                    absl::Span<const kernels::CopySegment> segments) override {
    backend_->Add({"copy", id_, std::this_thread::get_id(), fence, direction,
                   backend_->device_allocator().current_bytes()});
    for (const auto& s : segments) std::memcpy(s.dst, s.src, static_cast<size_t>(s.bytes));
    return absl::OkStatus();
  }

 private:
  RecordingBackend* backend_;
  int id_;
};

absl::StatusOr<std::unique_ptr<kernels::CopyEngine>> RecordingBackend::NewCopyEngine() {
  if (!engine_error.ok()) return engine_error;
  return std::make_unique<RecordingEngine>(this, engines_made++);
}

TEST(CopierEngineTest, DuplexUsesOneEnginePerDirectionWithFencesTakenAtIssue) {
  RecordingBackend backend;
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 0.25f;
  auto t = backend.FromHost({1000}, values, "stash");
  ASSERT_TRUE(t.ok());
  std::vector<kernels::Tensor*> slots = {&*t};
  {
    ActivationCopier copier(&backend);  // duplex by default
    EXPECT_EQ(backend.engines_made, 2);
    auto off = copier.StartOffload(slots, "offload");
    ASSERT_TRUE(off.ok()) << off.status();
    ASSERT_TRUE((*off)->Wait().ok());
    copier.ReleaseSource(**off);
    const int64_t before_reload = backend.device_allocator().current_bytes();
    auto rel = copier.StartReload(slots, "reload", *off);
    ASSERT_TRUE(rel.ok()) << rel.status();
    ASSERT_TRUE(copier.Drain().ok());

    const std::vector<Record> r = backend.records();
    ASSERT_EQ(r.size(), 4u);
    // OFFLOAD: fence on the issuing thread, D2H copy with that fence on the D2H engine's thread.
    EXPECT_EQ(r[0].what, "fence");
    EXPECT_EQ(r[0].thread, std::this_thread::get_id());
    EXPECT_EQ(r[1].what, "copy");
    EXPECT_EQ(r[1].engine, r[0].engine);
    EXPECT_EQ(r[1].fence, r[0].fence);
    EXPECT_EQ(r[1].direction, CopyDirection::kDeviceToHost);
    EXPECT_NE(r[1].thread, std::this_thread::get_id());
    // RELOAD: the fence comes after the destination's allocation (stream-ordered memory must be
    // allocated before the copy stream may write it), H2D on the other engine.
    EXPECT_EQ(r[2].what, "fence");
    EXPECT_EQ(r[2].thread, std::this_thread::get_id());
    EXPECT_EQ(r[2].device_bytes, before_reload + 4000);
    EXPECT_NE(r[2].engine, r[0].engine) << "duplex: separate D2H and H2D engines (streams)";
    EXPECT_EQ(r[3].what, "copy");
    EXPECT_EQ(r[3].engine, r[2].engine);
    EXPECT_EQ(r[3].fence, r[2].fence);
    EXPECT_EQ(r[3].direction, CopyDirection::kHostToDevice);
    EXPECT_NE(r[3].thread, r[1].thread);
  }
  EXPECT_EQ(*backend.ToVector(*t), values);
}

TEST(CopierEngineTest, OneCopyThreadUsesOneEngineForBothDirections) {
  RecordingBackend backend;
  auto t = backend.Zeros({64}, "stash");
  ASSERT_TRUE(t.ok());
  std::vector<kernels::Tensor*> slots = {&*t};
  ActivationCopierOptions options;
  options.duplex = false;
  ActivationCopier copier(&backend, options);
  EXPECT_EQ(backend.engines_made, 1);
  auto off = copier.StartOffload(slots, "offload");
  ASSERT_TRUE(off.ok());
  auto rel = copier.StartReload(slots, "reload", *off);
  ASSERT_TRUE(rel.ok());
  ASSERT_TRUE(copier.Drain().ok());
  copier.ReleaseSource(**off);
  for (const Record& r : backend.records()) EXPECT_EQ(r.engine, 0) << r.what;
}

TEST(CopierEngineTest, AnEngineThatCannotBeMadeFailsTheCopyAndLeavesTheSlots) {
  RecordingBackend backend;
  backend.engine_error = absl::InternalError("cudaStreamCreateWithFlags failed");
  auto t = backend.Zeros({64}, "stash");
  ASSERT_TRUE(t.ok());
  std::vector<kernels::Tensor*> slots = {&*t};
  ActivationCopier copier(&backend);
  auto off = copier.StartOffload(slots, "offload");
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.status().message().find("cudaStreamCreateWithFlags"), std::string::npos);
  EXPECT_EQ(t->location(), kernels::Location::kDevice);
  EXPECT_EQ(backend.host_allocator().current_bytes(), 0);
}

TEST(CopierEngineTest, ARawCopyReplacesTheEngines) {
  RecordingBackend backend;
  auto t = backend.Zeros({64}, "stash");
  ASSERT_TRUE(t.ok());
  std::vector<kernels::Tensor*> slots = {&*t};
  int calls = 0;
  ActivationCopierOptions options;
  options.raw_copy = [&calls](float* dst, const float* src, int64_t bytes) {
    ++calls;
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  };
  ActivationCopier copier(&backend, options);
  auto off = copier.StartOffload(slots, "offload");
  ASSERT_TRUE(off.ok());
  ASSERT_TRUE(copier.Drain().ok());
  copier.ReleaseSource(**off);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(backend.engines_made, 0);
  EXPECT_TRUE(backend.records().empty());
}

}  // namespace
}  // namespace pipetrain::worker
