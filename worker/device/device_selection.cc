#include "worker/device/device_selection.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pipetrain::worker {

std::string Describe(const DeviceInfo& d) {
  if (d.kind != v1::DEVICE_KIND_CUDA) return "cpu";
  return absl::StrFormat("cuda:%d (%s, %.1f GiB, sm %s)", d.index, d.name,
                         static_cast<double>(d.total_memory_bytes) / (1 << 30),
                         d.compute_capability);
}

absl::StatusOr<DeviceChoice> SelectDevice(absl::string_view flag, const DeviceList& devices) {
  DeviceChoice choice;
  if (flag == "cpu") return choice;
  int index = -1;  // -1: auto
  if (flag == "cuda") {
    index = 0;
  } else if (absl::StartsWith(flag, "cuda:")) {
    if (!absl::SimpleAtoi(flag.substr(5), &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--device: \"", flag, "\" is not allowed; allowed: auto, cpu, cuda, cuda:N (N >= 0)"));
    }
  } else if (flag != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device: \"", flag, "\" is not allowed; allowed: auto, cpu, cuda, cuda:N (N >= 0)"));
  }
  absl::StatusOr<std::vector<DeviceInfo>> cuda = devices.CudaDevices();
  if (index < 0) {  // auto
    if (cuda.ok() && !cuda->empty()) {
      choice.device = cuda->front();
      return choice;
    }
    choice.fallback_reason = absl::StrCat(
        "--device auto: computing on the CPU: ",
        cuda.ok() ? "no CUDA device is visible" : std::string(cuda.status().message()));
    return choice;
  }
  if (!cuda.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--device ", flag, ": no usable CUDA device: ", cuda.status().message()));
  }
  if (index >= static_cast<int>(cuda->size())) {
    return absl::FailedPreconditionError(absl::StrCat("--device ", flag, ": only ", cuda->size(),
                                                      " CUDA device(s) visible (0..",
                                                      cuda->size() - 1, ")"));
  }
  choice.device = (*cuda)[index];
  return choice;
}

}  // namespace pipetrain::worker
