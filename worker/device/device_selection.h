// The worker's --device flag: "auto" (CUDA when a device is usable, else the CPU, with the
// reason), "cpu", "cuda" (device 0) or "cuda:N". An explicit CUDA choice that cannot be met is
// an error that says why, so a GPU pod never trains on the CPU by accident.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_WORKER_DEVICE_DEVICE_SELECTION_H_
#define PIPETRAIN_WORKER_DEVICE_DEVICE_SELECTION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/device/device_info.h"
#include "worker/device/device_list.h"

namespace pipetrain::worker {

struct DeviceChoice {
  DeviceInfo device;
  // Why "auto" fell back to the CPU (empty otherwise): one line for the log.
  std::string fallback_reason;
};

// InvalidArgument naming --device and the allowed values for a malformed flag;
// FailedPrecondition for "cuda" / "cuda:N" when that device is not usable (with the reason).
absl::StatusOr<DeviceChoice> SelectDevice(absl::string_view flag, const DeviceList& devices);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_DEVICE_DEVICE_SELECTION_H_
