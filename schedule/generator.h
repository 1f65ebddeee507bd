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
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/pipeline_spec.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

using GeneratorFn = std::function<absl::StatusOr<Schedule>(const PipelineSpec&)>;

struct GeneratorInfo {
  std::string name;         // registry key, lower case: "1f1b", "zb-h1", ...
  std::string description;  // one line for --help and error messages
  GeneratorFn fn;
  // Chunks (virtual stages) per worker of its schedules when PipelineSpec::chunks_per_worker is
  // 0; for `auto`, the most any of its candidates uses.
  int chunks = 1;
  // Whether chunks_per_worker may ask for another count (interleaved schedules).
  bool chunks_configurable = false;
};

// All generators, in a stable order.
const std::vector<GeneratorInfo>& Generators();
std::vector<std::string> GeneratorNames();

// The named generator; InvalidArgument listing the valid names if there is none.
absl::StatusOr<const GeneratorInfo*> FindGenerator(absl::string_view name);

// Chunks per worker that generator `name` uses for a requested chunks_per_worker (0: its
// default; for `auto` the most it may use). InvalidArgument naming chunks_per_worker when the
// generator takes no other count, or for an unknown name.
absl::StatusOr<int> ChunksPerWorker(absl::string_view name, int requested);

// Checks the spec's common fields (p >= 1, m >= 1, ...), resolves chunks_per_worker (0 becomes
// the generator's default, except for `auto`, whose candidates each take their own), runs the
// named generator, then ValidateSchedule. Unknown names: InvalidArgument listing the valid names.
absl::StatusOr<Schedule> Generate(absl::string_view name, const PipelineSpec& spec);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_GENERATOR_H_
