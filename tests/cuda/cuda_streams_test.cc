// CudaBackend beside other work on the GPU, and driven from other threads (skipped without a
// device; the device-1 tests need two). Each test would fail on the backend before it had its
// own stream, stream-ordered memory and per-thread device selection:
//  - freeing a device or pinned host tensor does not wait for an unrelated busy stream
//    (cudaFree / cudaFreeHost synchronised the device: a free waited 800 ms);
//  - Synchronize and host-returning ops wait for the backend's stream only, and its work does
//    not queue behind the legacy default stream;
//  - a backend on device 1 driven from a thread whose current device is 0 allocates and
//    computes on device 1, and leaves that thread's current device alone.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda/busy_kernel.h"

namespace pipetrain::kernels::cuda {
namespace {

constexpr int64_t kBusyNs = 800'000'000;  // 800 ms, the figure measured on an H200
const absl::Duration kQuick = absl::Milliseconds(100);

#define SKIP_WITHOUT_DEVICES(n)                                                       \
  do {                                                                                \
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";             \
    if (CudaDeviceCount() < (n))                                                      \
      GTEST_SKIP() << "needs " << (n) << " CUDA devices, have " << CudaDeviceCount(); \
  } while (0)

CudaBackendOptions OnDevice(int device) {
  CudaBackendOptions options;
  options.device = device;
  return options;
}

// An unrelated non-blocking stream on device 0, busy for kBusyNs.
class BusyStream {
 public:
  explicit BusyStream(bool legacy = false) {
    if (!legacy) {
      EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    }
    EXPECT_EQ(pipetrain::testing::LaunchBusyKernel(stream_, kBusyNs), cudaSuccess);
  }
  ~BusyStream() {
    cudaStreamSynchronize(stream_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  bool still_busy() const { return cudaStreamQuery(stream_) == cudaErrorNotReady; }

 private:
  cudaStream_t stream_ = nullptr;  // null: the legacy default stream
};

TEST(CudaStreamsTest, FreeingTensorsDoesNotWaitForAnUnrelatedBusyStream) {
  SKIP_WITHOUT_DEVICES(1);
  auto be = CudaBackend::Create({});
  ASSERT_TRUE(be.ok()) << be.status();
  auto device = (*be)->Zeros({1 << 20}, "device tensor");
  auto host = (*be)->host_allocator().Allocate({1 << 20}, "pinned tensor");
  ASSERT_TRUE(device.ok() && host.ok());
  ASSERT_TRUE((*be)->Synchronize().ok());
  BusyStream busy;
  absl::Time start = absl::Now();
  device->Reset();
  host->Reset();
  const absl::Duration free_time = absl::Now() - start;
  start = absl::Now();
  auto again = (*be)->Empty({1 << 20}, "reallocated");
  auto host_again = (*be)->host_allocator().Allocate({1 << 20}, "pinned again");
  const absl::Duration alloc_time = absl::Now() - start;
  ASSERT_TRUE(again.ok() && host_again.ok());
  EXPECT_TRUE(busy.still_busy()) << "the busy kernel ended early; the timing proves nothing";
  EXPECT_LT(free_time, kQuick) << "a free waited for another stream";
  EXPECT_LT(alloc_time, kQuick) << "an allocation waited for another stream";
  EXPECT_EQ((*be)->pinned_host_cache().hits, 1) << "the freed pinned block was not reused";
}

TEST(CudaStreamsTest, SynchronizeAndHostResultsWaitForTheBackendsStreamOnly) {
  SKIP_WITHOUT_DEVICES(1);
  auto be = CudaBackend::Create({});
  ASSERT_TRUE(be.ok()) << be.status();
  auto t = (*be)->Zeros({4096}, "t");
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*be)->Synchronize().ok());
  BusyStream busy;
  const absl::Time start = absl::Now();
  ASSERT_TRUE((*be)->Fill(2.5f, &*t).ok());
  ASSERT_TRUE((*be)->Synchronize().ok());
  auto values = (*be)->ToVector(*t);
  ASSERT_TRUE(values.ok());
  EXPECT_LT(absl::Now() - start, kQuick) << "Synchronize or ToVector waited for another stream";
  EXPECT_TRUE(busy.still_busy());
  EXPECT_EQ((*values)[4095], 2.5f);
}

TEST(CudaStreamsTest, TheBackendsWorkDoesNotQueueBehindTheLegacyDefaultStream) {
  SKIP_WITHOUT_DEVICES(1);
  auto be = CudaBackend::Create({});
  ASSERT_TRUE(be.ok()) << be.status();
  ASSERT_NE((*be)->compute_stream(), nullptr);
  const std::vector<float> a(64 * 64, 1.0f);
  auto x = (*be)->FromHost({64, 64}, a, "x");
  auto y = (*be)->Zeros({64, 64}, "y");
  ASSERT_TRUE(x.ok() && y.ok());
  // Warm up (cuBLAS and its kernels load lazily) before timing.
  ASSERT_TRUE((*be)->Gemm(*x, false, *x, false, 1.0f, 0.0f, &*y).ok());
  ASSERT_TRUE((*be)->Synchronize().ok());
  BusyStream busy(/*legacy=*/true);
  const absl::Time start = absl::Now();
  ASSERT_TRUE((*be)->Gemm(*x, false, *x, false, 1.0f, 0.0f, &*y).ok());
  auto out = (*be)->ToVector(*y);
  ASSERT_TRUE(out.ok());
  EXPECT_LT(absl::Now() - start, kQuick) << "the backend's GEMM waited for the legacy stream";
  EXPECT_TRUE(busy.still_busy());
  EXPECT_EQ((*out)[0], 64.0f);
}

// Drives `be` from a new thread whose current device is 0 and checks where the memory is.
void DriveFromAnotherThread(CudaBackend* be, int want_device) {
  std::thread([&] {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    auto a = be->FromHost({32, 32}, std::vector<float>(32 * 32, 0.5f), "a");
    auto c = be->Zeros({32, 32}, "c");
    ASSERT_TRUE(a.ok() && c.ok()) << a.status() << c.status();
    cudaPointerAttributes attributes;
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, c->data()), cudaSuccess);
    EXPECT_EQ(attributes.device, want_device) << "allocated on the wrong device";
    ASSERT_TRUE(be->Gemm(*a, false, *a, true, 1.0f, 0.0f, &*c).ok());
    auto values = be->ToVector(*c);
    ASSERT_TRUE(values.ok()) << values.status();
    EXPECT_EQ((*values)[0], 8.0f);  // 32 * 0.25
    int current = -1;
    cudaGetDevice(&current);
    EXPECT_EQ(current, 0) << "an op left the driving thread on another device";
  }).join();
}

TEST(CudaStreamsTest, ABackendDrivenFromAnotherThreadWorksOnItsDevice) {
  SKIP_WITHOUT_DEVICES(1);
  auto be = CudaBackend::Create(OnDevice(0));
  ASSERT_TRUE(be.ok()) << be.status();
  DriveFromAnotherThread(be->get(), 0);
}

TEST(CudaStreamsTest, ABackendOnDevice1DrivenFromAnotherThreadWorksOnDevice1) {
  SKIP_WITHOUT_DEVICES(2);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto be = CudaBackend::Create(OnDevice(1));
  ASSERT_TRUE(be.ok()) << be.status();
  int current = -1;
  cudaGetDevice(&current);
  EXPECT_EQ(current, 0) << "Create left the creating thread on device 1";
  DriveFromAnotherThread(be->get(), 1);
  // Tensors freed from this thread (device 0 current) go back to device 1's pool.
  auto t = (*be)->Zeros({1024}, "freed from the creating thread");
  ASSERT_TRUE(t.ok());
  t->Reset();
  EXPECT_TRUE((*be)->Synchronize().ok());
  EXPECT_EQ((*be)->device_allocator().current_bytes(), (*be)->device_allocator().scratch_bytes());
}

}  // namespace
}  // namespace pipetrain::kernels::cuda
