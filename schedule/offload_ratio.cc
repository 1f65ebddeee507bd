#include "schedule/offload_ratio.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pipetrain::schedule {

const std::vector<DeviceLink>& DevicePresets() {
  static const auto* const kPresets = new std::vector<DeviceLink>{
      {"a100", 220e12, 15e9, 15e9},
      {"h100", 440e12, 21e9, 21e9},
      {"h200", 440e12, 21e9, 21e9},
  };
  return *kPresets;
}

absl::StatusOr<DeviceLink> FindDevicePreset(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  std::vector<std::string> names;
  for (const DeviceLink& d : DevicePresets()) {
    if (d.name == lower) return d;
    names.push_back(d.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device preset \"", name,
                                                 "\"; valid: ", absl::StrJoin(names, ", ")));
}

DeviceLink WithMeasuredLink(DeviceLink preset, double measured_d2h, double measured_h2d) {
  if (measured_d2h > 0) preset.d2h_bytes_per_s = measured_d2h;
  if (measured_h2d > 0) preset.h2d_bytes_per_s = measured_h2d;
  return preset;
}

absl::StatusOr<double> OffloadRatio(int hidden, int seq_len, const DeviceLink& device) {
  if (hidden <= 0 || seq_len <= 0 || !(device.flops_per_s > 0) || !(device.d2h_bytes_per_s > 0) ||
      !(device.h2d_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offload ratio needs hidden > 0, seq_len > 0, flops_per_s > 0 and both link bandwidths "
        "> 0 (got hidden=", hidden, " seq_len=", seq_len, " flops_per_s=", device.flops_per_s,
        " d2h=", device.d2h_bytes_per_s, " h2d=", device.h2d_bytes_per_s, ")"));
  }
  const double seconds_per_byte_round_trip =
      0.5 / device.d2h_bytes_per_s + 0.5 / device.h2d_bytes_per_s;
  return 10.0 / (3.0 * (6.0 * hidden + seq_len)) * device.flops_per_s * seconds_per_byte_round_trip;
}

double OffloadRatioOf(const CostModel& costs, int stage) {
  const StageCost& s = costs.stages[stage];
  const double compute = s.f + s.b + s.w;
  const double round_trip = costs.OffloadTime(stage) + costs.ReloadTime(stage);
  return compute > 0 ? round_trip / compute : (round_trip > 0 ? 1e300 : 0.0);
}

double MaxOffloadRatio(const CostModel& costs) {
  double k = 0;
  for (int s = 0; s < static_cast<int>(costs.stages.size()); ++s) {
    k = std::max(k, OffloadRatioOf(costs, s));
  }
  return k;
}

}  // namespace pipetrain::schedule
