// Schedule generators and their registry.
//
// A generator is a pure function PipelineSpec -> Schedule that emits compute actions only
// (F, B, W, BW); passes (passes.h) add transfers and offload actions. Generators are found by
// name in one registry; an unknown name is an error that lists the valid ones.
//
// Thread-safety: the registry is immutable after static initialisation; all functions are pure.
#ifndef PIPETRAIN_SCHEDULE_GENERATOR_H_
#define PIPETRAIN_SCHEDULE_GENERATOR_H_

#include <functional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct PipelineSpec {
  int num_workers = 0;        // p >= 1
  int num_microbatches = 0;   // m >= 1
  int chunks_per_worker = 0;  // v; 0 = the generator's default (1, or 2 for V-shape)
  // Costs for a worker's whole share of layers (split evenly over its chunks) ...
  double f = 1.0, b = 1.0, w = 1.0;
  double comm = 0.0;
  // ... unless `stage_costs` is non-empty: then it is used as is and must have one entry per
  // stage of the generated schedule.
  CostModel stage_costs;
  // Peak activation memory allowed per worker (units); 0 = unlimited. Generators that take a
  // memory limit (ZB-H1/H2, V-*, auto) respect it or fail with ResourceExhausted.
  double memory_limit = 0.0;
  // Offload ratio k of the host link (offload_ratio.h): one chunk's copy time out and back over
  // its f + b + w (each way k/2 of it, both directions alike). 0 = no host link: `auto` then plans without offload. When > 0 and
  // memory_limit is set, `auto` also considers offload plans (auto_planner.h).
  double offload_ratio = 0.0;
  // Microbatches per interleaving group for "interleaved-group" (generalised interleaved 1F1B);
  // 0 = p (Megatron's order).
  int group_size = 0;
};

// The cost model a generator plans with for a schedule of `num_stages` stages.
CostModel CostModelFor(const PipelineSpec& spec, int chunks_per_worker);

using GeneratorFn = std::function<absl::StatusOr<Schedule>(const PipelineSpec&)>;

struct GeneratorInfo {
  std::string name;         // registry key, lower case: "1f1b", "zb-h1", ...
  std::string description;  // one line for --help and error messages
  GeneratorFn fn;
};

// All generators, in a stable order.
const std::vector<GeneratorInfo>& Generators();
std::vector<std::string> GeneratorNames();

// Checks the spec's common fields (p >= 1, m >= 1, ...), runs the named generator, then
// ValidateSchedule. Unknown names: InvalidArgument listing the valid names.
absl::StatusOr<Schedule> Generate(absl::string_view name, const PipelineSpec& spec);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_GENERATOR_H_
