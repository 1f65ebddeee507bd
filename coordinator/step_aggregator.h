// StepAggregator: turns the per-rank StepReports of one running job into per-step results. A step
// is complete when every rank has reported it; complete steps are applied to the Job in step order:
// steps_done, losses / last_loss / last_accuracy (from the rank whose report has_loss),
// measured_peak_activation_bytes (per rank, max over steps), last_step_s (slowest rank),
// tokens_per_s (tokens_per_step / last_step_s) and measured_bubble_ratio (1 - max over ranks of
// the summed compute-action time / the longest rank's step duration; only from reports that
// carry timings), skipped_steps (steps whose optimizer update the ranks skipped for
// non-finite gradients), grad_norms and clipped_steps (from the report that has_grad_norm). Each completed step also comes back whole (every rank's report with its
// action timings) for the job's trace keeper (step_traces.h).
// Also the numbers users compare (docs/training.md, "Metrics"): learning_rate (of the step;
// learning_rates keeps every step's, like losses),
// model_flops_per_s (model FLOPs per step / the step's time), mfu (that / the job's peak, 0 when
// the peak is unknown), the job-long trained_s / timed_steps and their mean tokens/s, FLOP/s
// and MFU, and evaluations (the loss-holding rank's validation pass, if the step ran one; a
// redone step's pass replaces the earlier one of its step).
//
// Thread-safety: not thread-safe; the job manager calls it under its lock.
#ifndef PIPETRAIN_COORDINATOR_STEP_AGGREGATOR_H_
#define PIPETRAIN_COORDINATOR_STEP_AGGREGATOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "pipetrain/v1/coordinator.pb.h"
#include "pipetrain/v1/job.pb.h"
#include "pipetrain/v1/metrics.pb.h"

namespace pipetrain::coordinator {

struct CompletedStep {
  v1::StepReport summary;  // the loss-holding rank's report, without timings
  v1::StepTrace trace;     // every rank's report with timings, by rank (job_id unset)
  // By rank: 1 - the rank's compute-action time / the step's duration (the slowest rank's),
  // schedule::RankBubbles; empty when some rank's report had no timings.
  std::vector<double> rank_bubble_ratios;
};

// What one step computes and what the job's devices could: the job-constant inputs of the
// throughput metrics.
struct StepWork {
  int64_t tokens_per_step = 0;     // global batch x sequence length
  double model_flops_per_step = 0; // model::ModelFlopsPerStep
  double peak_flops_per_s = 0;     // the job's workers' (model::JobPeakFlops); 0 = unknown
};

class StepAggregator {
 public:
  // `first_step`: where the run starts (a resumed run starts at its checkpoint's step; earlier
  // reports are ignored).
  StepAggregator(int num_ranks, StepWork work, int first_step = 0);

  // Adds rank report.rank()'s report of report.step() (duplicates and steps already complete are
  // ignored). Applies every step that became complete to `job` and returns those steps in order.
  std::vector<CompletedStep> Add(const v1::StepReport& report, v1::Job* job);

  int next_step() const { return next_step_; }

 private:
  struct RankStep {
    v1::StepReport report;  // with timings
    int64_t compute_ns = 0;
    bool has_timings = false;
  };
  void Apply(const std::vector<std::optional<RankStep>>& ranks, v1::Job* job) const;

  const int num_ranks_;
  const StepWork work_;
  int next_step_ = 0;
  std::map<int, std::vector<std::optional<RankStep>>> pending_;  // by step
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_STEP_AGGREGATOR_H_
