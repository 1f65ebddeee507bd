// SearchDataParallel: how to spend N workers on a job, as d data-parallel replicas of a p-rank
// pipeline with d x p = N (docs/data_parallel.md). Every split whose d divides the step's
// microbatches is planned with PlanJob (the job's schedule, `auto` included: then each split
// also gets its fastest schedule that fits the memory budget, offload as the job allows, and,
// with PlannerOptions::search_microbatch_size, every microbatch size that divides the global
// batch is tried too, since the size trades the pipeline's bubble against per-action efficiency
// and activation memory), and the candidate with
// the shortest predicted step wins: the global batch is fixed, so that is the highest
// throughput. The step compared is ExpectedStepSeconds (shared_host.h): with
// PlannerOptions::shared_host_cores, the d x p workers sharing those cores; else with the
// gradient sums across replicas. Candidates that cannot be planned (too few layers for the
// stages, over the memory budget) are listed with the reason. Ties go to the deeper pipeline
// (fewer gradient bytes to sum), then to the smaller microbatch.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_PLANNER_DATA_PARALLEL_SEARCH_H_
#define PIPETRAIN_PLANNER_DATA_PARALLEL_SEARCH_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipetrain/v1/job.pb.h"
#include "planner/planner.h"

namespace pipetrain::planner {

struct DataParallelCandidate {
  int replicas = 1;        // d
  int pipeline_ranks = 1;  // p
  int microbatch_size = 0;
  int microbatches_per_replica = 0;
  // Planned candidates: the schedule, whether it offloads, the expected step (what candidates
  // are compared by), the step with a device per worker (with the gradient sums), the step of
  // the pipeline alone, the longest stage sum, the busiest worker's peak activation bytes.
  std::string schedule;
  bool offload = false;
  double step_s = 0;
  double device_step_s = 0;
  double pipeline_step_s = 0;
  double allreduce_s = 0;
  double peak_activation_bytes = 0;
  std::string rejected;  // non-empty: why this split has no plan
};

// With `auto`, microbatch sizes giving more microbatches per step than this are not tried
// (unless the job's own): plans grow with the microbatches, and so does the search's time.
inline constexpr int kMaxSearchedMicrobatches = 256;

struct DataParallelSearch {
  std::vector<DataParallelCandidate> candidates;  // d ascending
  int chosen = -1;                                // index into candidates
  v1::JobSpec spec;                               // the chosen split's spec
  PlannedJob planned;                             // its plan
};

// InvalidArgument naming --workers when `workers` < 1; the first candidate's error when no
// split can be planned.
absl::StatusOr<DataParallelSearch> SearchDataParallel(const v1::JobSpec& spec, int workers,
                                                      const PlannerOptions& options = {});

// The candidates as a table and a sentence on the choice.
std::string FormatDataParallelSearch(const DataParallelSearch& search);

}  // namespace pipetrain::planner

#endif  // PIPETRAIN_PLANNER_DATA_PARALLEL_SEARCH_H_
