#include "planner/data_parallel_search.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/job_model.h"

namespace pipetrain::planner {

absl::StatusOr<DataParallelSearch> SearchDataParallel(const v1::JobSpec& spec, int workers,
                                                      const PlannerOptions& options) {
  if (workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers: ", workers, " is not allowed; allowed: >= 1"));
  }
  const int microbatches = model::NumMicrobatches(model::WithDefaults(spec));
  DataParallelSearch search;
  absl::Status first_error;
  for (int d = 1; d <= workers; ++d) {
    if (workers % d != 0) continue;
    DataParallelCandidate c;
    c.replicas = d;
    c.pipeline_ranks = workers / d;
    c.microbatches_per_replica = microbatches > 0 ? microbatches / d : 0;
    v1::JobSpec candidate = spec;
    candidate.mutable_parallelism()->set_num_workers(c.pipeline_ranks);
    candidate.mutable_parallelism()->set_data_parallel(d);
    if (microbatches % d != 0) {
      c.rejected = absl::StrCat(microbatches, " microbatches per step do not split into ", d,
                                " equal shares");
      search.candidates.push_back(c);
      continue;
    }
    absl::StatusOr<PlannedJob> planned = PlanJob(candidate, options);
    if (!planned.ok()) {
      if (first_error.ok()) first_error = planned.status();
      const std::string message(planned.status().message());
      c.rejected = message.substr(0, message.find('\n'));
      search.candidates.push_back(c);
      continue;
    }
    const v1::Prediction& pred = planned->plan.prediction();
    c.schedule = planned->schedule.name;
    c.pipeline_step_s = pred.makespan_s();
    c.step_s = d > 1 ? pred.data_parallel_step_s() : pred.makespan_s();
    for (double t : pred.stage_allreduce_s()) c.allreduce_s = std::max(c.allreduce_s, t);
    c.peak_activation_bytes =
        *std::max_element(planned->sim.peak_memory.begin(), planned->sim.peak_memory.end());
    search.candidates.push_back(c);
    const int index = static_cast<int>(search.candidates.size()) - 1;
    // Strictly faster wins, so on a tie the smaller d (deeper pipeline, found first) stays.
    if (search.chosen < 0 || c.step_s < search.candidates[search.chosen].step_s) {
      search.chosen = index;
      search.spec = candidate;
      search.planned = *std::move(planned);
    }
  }
  if (search.chosen < 0) {
    if (!first_error.ok()) return first_error;
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers: no split of ", workers, " workers into replicas x pipeline ranks divides the ",
        microbatches, " microbatches per step"));
  }
  return search;
}

std::string FormatDataParallelSearch(const DataParallelSearch& search) {
  std::string out = absl::StrFormat("%-3s %-3s %-8s %-10s %12s %12s %12s %12s\n", "d", "p",
                                    "mb/repl", "schedule", "step s", "pipeline s",
                                    "sum ms/stage", "peak MiB");
  for (size_t i = 0; i < search.candidates.size(); ++i) {
    const DataParallelCandidate& c = search.candidates[i];
    const char* mark = static_cast<int>(i) == search.chosen ? " <- chosen" : "";
    if (!c.rejected.empty()) {
      absl::StrAppendFormat(&out, "%-3d %-3d %-8d rejected: %s\n", c.replicas, c.pipeline_ranks,
                            c.microbatches_per_replica, c.rejected);
      continue;
    }
    absl::StrAppendFormat(&out, "%-3d %-3d %-8d %-10s %12.4f %12.4f %12.3f %12.2f%s\n",
                          c.replicas, c.pipeline_ranks, c.microbatches_per_replica, c.schedule,
                          c.step_s, c.pipeline_step_s, 1e3 * c.allreduce_s,
                          c.peak_activation_bytes / (1 << 20), mark);
  }
  if (search.chosen >= 0) {
    const DataParallelCandidate& c = search.candidates[search.chosen];
    absl::StrAppendFormat(&out,
                          "chosen: %d replica(s) x %d pipeline ranks, %s: the shortest predicted "
                          "step (%.4f s, gradient sums across replicas included)\n",
                          c.replicas, c.pipeline_ranks, c.schedule, c.step_s);
  }
  return out;
}

}  // namespace pipetrain::planner
