#include "planner/data_parallel_search.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/job_model.h"
#include "planner/shared_host.h"
#include "schedule/engine.h"

namespace pipetrain::planner {
namespace {

// The microbatch sizes to try, ascending: with `auto` and search_microbatch_size, every divisor
// of the global batch that gives at most kMaxSearchedMicrobatches microbatches per step (and the
// job's own size); else only the job's own.
std::vector<int> MicrobatchSizes(const v1::JobSpec& spec, const PlannerOptions& options) {
  const v1::JobSpec full = model::WithDefaults(spec);
  const int own = full.training().microbatch_size();
  const int batch = full.training().global_batch();
  if (!options.search_microbatch_size || full.parallelism().schedule() != "auto" || batch <= 0 ||
      own <= 0) {
    return {own};
  }
  std::vector<int> sizes;
  for (int b = 1; b <= batch; ++b) {
    if (batch % b == 0 && (b == own || batch / b <= kMaxSearchedMicrobatches)) sizes.push_back(b);
  }
  return sizes;
}

}  // namespace

absl::StatusOr<DataParallelSearch> SearchDataParallel(const v1::JobSpec& spec, int workers,
                                                      const PlannerOptions& options) {
  if (workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers: ", workers, " is not allowed; allowed: >= 1"));
  }
  const v1::JobSpec full = model::WithDefaults(spec);
  const std::vector<int> sizes = MicrobatchSizes(spec, options);
  DataParallelSearch search;
  absl::Status first_error;
  for (int d = 1; d <= workers; ++d) {
    if (workers % d != 0) continue;
    for (int mbs : sizes) {
      DataParallelCandidate c;
      c.replicas = d;
      c.pipeline_ranks = workers / d;
      c.microbatch_size = mbs;
      v1::JobSpec candidate = spec;
      candidate.mutable_parallelism()->set_num_workers(c.pipeline_ranks);
      candidate.mutable_parallelism()->set_data_parallel(d);
      candidate.mutable_training()->set_microbatch_size(mbs);
      const int microbatches = model::NumMicrobatches(model::WithDefaults(candidate));
      c.microbatches_per_replica = microbatches > 0 ? microbatches / d : 0;
      if (microbatches % d != 0) {
        // With several sizes only the job's own is listed as rejected (the others just do not
        // apply to this split).
        if (sizes.size() > 1 && mbs != full.training().microbatch_size()) continue;
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
      c.offload = schedule::ScanActions(planned->schedule).HasOffload();
      c.pipeline_step_s = pred.makespan_s();
      c.device_step_s = d > 1 ? pred.data_parallel_step_s() : pred.makespan_s();
      c.step_s = ExpectedStepSeconds(pred);
      for (double t : pred.stage_allreduce_s()) c.allreduce_s = std::max(c.allreduce_s, t);
      c.peak_activation_bytes =
          *std::max_element(planned->sim.peak_memory.begin(), planned->sim.peak_memory.end());
      search.candidates.push_back(c);
      const int index = static_cast<int>(search.candidates.size()) - 1;
      // Strictly faster wins, so on a tie the smaller d (deeper pipeline, found first) and then
      // the smaller microbatch stays.
      if (search.chosen < 0 || c.step_s < search.candidates[search.chosen].step_s) {
        search.chosen = index;
        search.spec = candidate;
        search.planned = *std::move(planned);
      }
    }
  }
  if (search.chosen < 0) {
    if (!first_error.ok()) return first_error;
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers: no split of ", workers, " workers into replicas x pipeline ranks divides the ",
        model::NumMicrobatches(full), " microbatches per step"));
  }
  return search;
}

std::string FormatDataParallelSearch(const DataParallelSearch& search) {
  std::string out = absl::StrFormat("%-3s %-3s %-4s %-8s %-20s %-4s %10s %10s %10s %12s %10s\n",
                                    "d", "p", "mbs", "mb/repl", "schedule", "offl", "step s",
                                    "device s", "pipeline s", "sum ms/stage", "peak MiB");
  for (size_t i = 0; i < search.candidates.size(); ++i) {
    const DataParallelCandidate& c = search.candidates[i];
    const char* mark = static_cast<int>(i) == search.chosen ? " <- chosen" : "";
    if (!c.rejected.empty()) {
      absl::StrAppendFormat(&out, "%-3d %-3d %-4d %-8d rejected: %s\n", c.replicas,
                            c.pipeline_ranks, c.microbatch_size, c.microbatches_per_replica,
                            c.rejected);
      continue;
    }
    absl::StrAppendFormat(&out,
                          "%-3d %-3d %-4d %-8d %-20s %-4s %10.4f %10.4f %10.4f %12.3f %10.2f%s\n",
                          c.replicas, c.pipeline_ranks, c.microbatch_size,
                          c.microbatches_per_replica, c.schedule, c.offload ? "yes" : "no",
                          c.step_s, c.device_step_s, c.pipeline_step_s, 1e3 * c.allreduce_s,
                          c.peak_activation_bytes / (1 << 20), mark);
  }
  if (search.chosen >= 0) {
    const DataParallelCandidate& c = search.candidates[search.chosen];
    const bool shared = c.step_s != c.device_step_s;
    absl::StrAppendFormat(&out,
                          "chosen: %d replica(s) x %d pipeline ranks, microbatches of %d, %s%s: "
                          "the shortest predicted step (%.4f s, gradient sums across replicas "
                          "included%s), i.e. the highest throughput for the global batch\n",
                          c.replicas, c.pipeline_ranks, c.microbatch_size, c.schedule,
                          c.offload ? " with offload" : "", c.step_s,
                          shared ? "; workers sharing the host's cores" : "");
  }
  return out;
}

}  // namespace pipetrain::planner
