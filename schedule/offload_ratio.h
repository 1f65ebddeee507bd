// Offload ratio k (PipeOffload, arXiv 2503.01328): the time to move one layer's stored activations to
// host memory and back (D2H + H2D) divided by that layer's F+B+W compute time. k <= 1 means the
// round trip of every activation fits in the compute it must hide behind, even on a link that
// moves one direction at a time, so a full offload (PO-F) can be hidden; k in (1, 2] still hides
// about half of them (PO-H); beyond that only a selected part.
//
// Why the round trip: the paper's formula is k = 10 / (3 (6h + s)) x FLOP/s / (link bytes/s),
// i.e. 40h bytes per token and layer over the 12h(6h+s) FLOPs of F+B+W (F: 24h^2 + 4hs, B and W
// about as much each). The authors' implementation stores about 20h bytes per token and layer
// (16-bit, fused attention, layernorm/GeLU outputs and dropout masks recomputed: Korthikanti et
// al.'s 34h less 14h) and moves each one-way copy in (k/2)(F+B+W) (its offload time is k/2 per
// direction): the 40h is out and back. Under the paper's "one way" wording k = 1 would
// be a link busy 100% of the time in each direction (here k = 2), where full offload keeps
// memory flat only by stretching the step (offload_pass.h).
// From a cost model the same ratio is read directly: (offload + reload time of a stage's stash)
// / (f + b + w).
//
// Device presets give a sustained FLOP/s and the host link's bytes/s each way; measured copy
// bandwidth (workers measure theirs at start-up) overrides the preset's link.
//
// Thread-safety: pure functions; the preset table is immutable.
#ifndef PIPETRAIN_SCHEDULE_OFFLOAD_RATIO_H_
#define PIPETRAIN_SCHEDULE_OFFLOAD_RATIO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/cost_model.h"

namespace pipetrain::schedule {

struct DeviceLink {
  std::string name;
  double flops_per_s = 0;      // sustained 16-bit GEMM throughput
  double d2h_bytes_per_s = 0;  // host link, device -> host
  double h2d_bytes_per_s = 0;  // host link, host -> device
};

// "a100" (220 TFLOP/s, 15 GB/s), "h100" (440 TFLOP/s, 21 GB/s): the authors' presets. "h200":
// the same Hopper compute and PCIe Gen5 host link as the H100 (its larger, faster HBM enters
// neither term), so the same numbers.
const std::vector<DeviceLink>& DevicePresets();
// Case-insensitive lookup; InvalidArgument listing the valid names.
absl::StatusOr<DeviceLink> FindDevicePreset(absl::string_view name);

// The preset with its link replaced by measured values (each used when > 0).
DeviceLink WithMeasuredLink(DeviceLink preset, double measured_d2h_bytes_per_s,
                            double measured_h2d_bytes_per_s);

// k from the model shape (h hidden size, s sequence length) for a device: the paper's formula
// with the link's two directions averaged as times (half the 40h bytes each way).
// InvalidArgument for non-positive inputs.
absl::StatusOr<double> OffloadRatio(int hidden, int seq_len, const DeviceLink& device);

// k of one stage under a cost model: (OffloadTime + ReloadTime) / (f + b + w).
double OffloadRatioOf(const CostModel& costs, int stage);
// The largest k over the stages.
double MaxOffloadRatio(const CostModel& costs);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_OFFLOAD_RATIO_H_
