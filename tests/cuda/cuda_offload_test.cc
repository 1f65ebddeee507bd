// OFFLOAD / RELOAD on a CudaBackend through the ActivationCopier, as the stage runners build it
// (BackendCopierOptions: the backend's copy engines, duplex). Skipped without a device; the
// device-1 case needs two. Before the copy engines existed the copier memcpy'd device pointers
// (a segfault at the first OFFLOAD); these tests check the bytes, the device they land on, and
// that a copy follows the compute queued before it was issued.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda/busy_kernel.h"
#include "worker/runtime/activation_copier.h"

namespace pipetrain::worker {
namespace {

using kernels::Location;
using kernels::Tensor;
using kernels::cuda::CudaBackend;
using kernels::cuda::CudaBackendOptions;
using kernels::cuda::CudaDeviceCount;

std::vector<float> Pattern(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1013) * 0.37f - 11.0f;
  v[7] = -0.0f;  // bytes, not values: a sign bit must survive too
  return v;
}

int DeviceOf(const void* p) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) return -1;
  return attributes.device;
}

void RoundTripOn(int device) {
  SCOPED_TRACE(device);
  CudaBackendOptions options;
  options.device = device;
  auto be = CudaBackend::Create(options);
  ASSERT_TRUE(be.ok()) << be.status();
  const std::vector<float> values = Pattern(3 << 20);  // 12 MiB in two tensors
  auto a = (*be)->FromHost({2 << 20},
                           std::vector<float>(values.begin(), values.begin() + (2 << 20)), "a");
  auto b =
      (*be)->FromHost({1 << 20}, std::vector<float>(values.begin() + (2 << 20), values.end()), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<Tensor*> slots = {&*a, &*b};
  ActivationCopier copier(be->get(), BackendCopierOptions(0));
  // Issue and release from a thread whose current device is 0, like an executor thread.
  std::thread executor([&] {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    auto off = copier.StartOffload(slots, "offload");
    ASSERT_TRUE(off.ok()) << off.status();
    ASSERT_TRUE((*off)->Wait().ok());
    ASSERT_EQ(a->location(), Location::kHost);
    // The host copies are pinned host memory: readable right here.
    EXPECT_EQ(std::memcmp(a->data(), values.data(), a->bytes()), 0) << "offloaded bytes of a";
    EXPECT_EQ(std::memcmp(b->data(), values.data() + (2 << 20), b->bytes()), 0);
    copier.ReleaseSource(**off);
    auto rel = copier.StartReload(slots, "reload", *off);
    ASSERT_TRUE(rel.ok()) << rel.status();
    ASSERT_TRUE((*rel)->Wait().ok());
    ASSERT_TRUE(copier.Drain().ok());
  });
  executor.join();
  ASSERT_EQ(a->location(), Location::kDevice);
  EXPECT_EQ(DeviceOf(a->data()), device);
  EXPECT_EQ(DeviceOf(b->data()), device);
  std::vector<float> back = *(*be)->ToVector(*a);
  const std::vector<float> back_b = *(*be)->ToVector(*b);
  back.insert(back.end(), back_b.begin(), back_b.end());
  ASSERT_EQ(back.size(), values.size());
  EXPECT_EQ(std::memcmp(back.data(), values.data(), values.size() * sizeof(float)), 0)
      << "the round trip changed bytes";
  EXPECT_EQ((*be)->host_allocator().current_bytes(), 0);
}

TEST(CudaOffloadTest, RoundTripRestoresTheExactBytesOnDevice0) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";
  RoundTripOn(0);
}

TEST(CudaOffloadTest, RoundTripRestoresTheExactBytesOnDevice1) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices, have " << CudaDeviceCount();
  RoundTripOn(1);
}

TEST(CudaOffloadTest, AnOffloadCopiesWhatTheComputeQueuedBeforeItWrote) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto be = CudaBackend::Create({});
  ASSERT_TRUE(be.ok()) << be.status();
  auto t = (*be)->Zeros({1 << 20}, "stash");
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*be)->Synchronize().ok());
  ActivationCopier copier(be->get(), BackendCopierOptions(0));
  // The compute stream is busy for 300 ms, then fills the stash; the offload is issued at once.
  // Without the fence the copy stream would read the zeros before the fill ran.
  ASSERT_EQ(pipetrain::testing::LaunchBusyKernel(static_cast<cudaStream_t>((*be)->compute_stream()),
                                                 300'000'000),
            cudaSuccess);
  ASSERT_TRUE((*be)->Fill(7.0f, &*t).ok());
  std::vector<Tensor*> slots = {&*t};
  auto off = copier.StartOffload(slots, "offload");
  ASSERT_TRUE(off.ok()) << off.status();
  ASSERT_TRUE((*off)->Wait().ok());
  const float* host = t->data();
  int wrong = 0;
  for (int64_t i = 0; i < t->numel(); ++i) wrong += host[i] != 7.0f;
  EXPECT_EQ(wrong, 0) << "the D2H copy did not wait for the compute queued before it";
  copier.ReleaseSource(**off);
  // And back: B would read the reloaded stash on the compute stream after the ticket is done.
  auto rel = copier.StartReload(slots, "reload", *off);
  ASSERT_TRUE(rel.ok());
  ASSERT_TRUE((*rel)->Wait().ok());
  auto back = (*be)->ToVector(*t);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0], 7.0f);
  EXPECT_EQ((*back)[(1 << 20) - 1], 7.0f);
}

}  // namespace
}  // namespace pipetrain::worker
