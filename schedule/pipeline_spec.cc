#include "schedule/pipeline_spec.h"

namespace pipetrain::schedule {

CostModel CostModelFor(const PipelineSpec& spec, int chunks_per_worker) {
  if (!spec.stage_costs.stages.empty()) return spec.stage_costs;
  CostModel c =
      UniformCostModel(spec.num_workers, chunks_per_worker, spec.f, spec.b, spec.w, spec.comm);
  const double compute = spec.f + spec.b + spec.w;
  if (spec.offload_ratio > 0 && compute > 0) {
    // A chunk holds 1/v unit and computes (f+b+w)/v; each way takes k/2 of that:
    // (1/v) / bw = (k/2) (f+b+w)/v.
    c.d2h_bytes_per_s = c.h2d_bytes_per_s = 2.0 / (spec.offload_ratio * compute);
  }
  return c;
}

}  // namespace pipetrain::schedule
