// --device: auto falls back to the CPU with the reason, an explicit CUDA choice that cannot be
// met is an error with the reason, malformed flags name the allowed values. Devices come from a
// fake list (the real one is exercised by the worker-process tests and on GPU machines).
#include "worker/device/device_selection.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pipetrain::worker {
namespace {

class FakeDevices : public DeviceList {
 public:
  explicit FakeDevices(absl::StatusOr<std::vector<DeviceInfo>> devices)
      : devices_(std::move(devices)) {}
  absl::StatusOr<std::vector<DeviceInfo>> CudaDevices() const override { return devices_; }

 private:
  absl::StatusOr<std::vector<DeviceInfo>> devices_;
};

DeviceInfo Gpu(int index) {
  DeviceInfo d;
  d.kind = v1::DEVICE_KIND_CUDA;
  d.index = index;
  d.name = "Test GPU";
  d.total_memory_bytes = int64_t{80} << 30;
  d.compute_capability = "9.0";
  return d;
}

const FakeDevices kNoDriver(absl::FailedPreconditionError(
    "the CUDA runtime found no device (cudaErrorInsufficientDriver: no driver)"));
const FakeDevices kTwoGpus(std::vector<DeviceInfo>{Gpu(0), Gpu(1)});

TEST(DeviceSelectionTest, AutoTakesTheFirstGpuOrFallsBackWithTheReason) {
  absl::StatusOr<DeviceChoice> c = SelectDevice("auto", kTwoGpus);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->device.kind, v1::DEVICE_KIND_CUDA);
  EXPECT_EQ(c->device.index, 0);
  EXPECT_EQ(c->fallback_reason, "");
  EXPECT_EQ(Describe(c->device), "cuda:0 (Test GPU, 80.0 GiB, sm 9.0)");

  c = SelectDevice("auto", kNoDriver);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->device.kind, v1::DEVICE_KIND_CPU);
  EXPECT_EQ(Describe(c->device), "cpu");
  EXPECT_NE(c->fallback_reason.find("computing on the CPU"), std::string::npos);
  EXPECT_NE(c->fallback_reason.find("cudaErrorInsufficientDriver"), std::string::npos);
}

TEST(DeviceSelectionTest, CpuIsAlwaysTheCpu) {
  for (const FakeDevices* devices : {&kTwoGpus, &kNoDriver}) {
    absl::StatusOr<DeviceChoice> c = SelectDevice("cpu", *devices);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->device.kind, v1::DEVICE_KIND_CPU);
    EXPECT_EQ(c->fallback_reason, "");
  }
}

TEST(DeviceSelectionTest, ExplicitCudaPicksTheOrdinalOrSaysWhyNot) {
  absl::StatusOr<DeviceChoice> c = SelectDevice("cuda:1", kTwoGpus);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->device.index, 1);
  c = SelectDevice("cuda", kTwoGpus);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device.index, 0);

  c = SelectDevice("cuda:2", kTwoGpus);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("only 2 CUDA device(s)"), std::string::npos) << c.status();
  c = SelectDevice("cuda", kNoDriver);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("no usable CUDA device"), std::string::npos);
  EXPECT_NE(c.status().message().find("cudaErrorInsufficientDriver"), std::string::npos);
}

TEST(DeviceSelectionTest, MalformedFlagsNameTheAllowedValues) {
  for (const char* flag : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA", ""}) {
    absl::StatusOr<DeviceChoice> c = SelectDevice(flag, kTwoGpus);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(c.status().message().find("allowed: auto, cpu, cuda, cuda:N"), std::string::npos)
        << c.status();
  }
}

// The device list of this build: a build without CUDA, or a CUDA build on a host without a
// usable device, gives a reason; a host with GPUs lists them with a name and memory.
TEST(DeviceSelectionTest, SystemListEitherListsDevicesOrSaysWhyNot) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = SystemDeviceList()->CudaDevices();
  if (!devices.ok()) {
    EXPECT_EQ(devices.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_FALSE(devices.status().message().empty());
    return;
  }
  ASSERT_FALSE(devices->empty());
  for (const DeviceInfo& d : *devices) {
    EXPECT_EQ(d.kind, v1::DEVICE_KIND_CUDA);
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory_bytes, 0);
  }
}

}  // namespace
}  // namespace pipetrain::worker
