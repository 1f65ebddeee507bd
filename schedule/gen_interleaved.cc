// Interleaved 1F1B (Megatron-LM order): v chunks per worker, stage c*p + w on worker w. The
// k-th forward slot of a worker runs chunk (k mod pv) / p on microbatch (k / pv) * p + k mod p;
// backward slots walk the chunks in reverse. Worker w warms up with 2(p-1-w) + (v-1)p forwards.
// That is the generalised order of gen_grouped.cc with groups of g = p microbatches.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/generators_classic.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> MakeInterleaved1F1B(const PipelineSpec& spec) {
  const int p = spec.num_workers, m = spec.num_microbatches;
  if (m % p != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interleaved-1f1b needs num_microbatches to be a multiple of num_workers (m >= p): got m=",
        m, ", p=", p, "; allowed m = ", p, ", ", 2 * p, ", ", 3 * p, ", ..."));
  }
  PipelineSpec grouped = spec;
  grouped.group_size = p;
  PT_ASSIGN_OR_RETURN(Schedule s, MakeGroupedInterleaved(grouped));
  s.name = "interleaved-1f1b";
  return s;
}

}  // namespace pipetrain::schedule
