#include "coordinator/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/step_buckets.h"
#include "coordinator/shared_cpu.h"
#include "schedule/bubble.h"

namespace pipetrain::coordinator {

std::string JobStateLabel(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  if (name.empty()) return absl::StrCat(static_cast<int>(state));
  constexpr absl::string_view kPrefix = "JOB_STATE_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return absl::AsciiStrToLower(name);
}

namespace {

bool Ended(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

}  // namespace

struct CoordinatorMetrics::Impl {
  explicit Impl(JobSeriesOptions options) : series(registry, options) {}

  // A series of job `id`: `labels` plus job_id, removed with the job's others.
  template <typename T, typename... Args>
  T& Job(prometheus::Family<T>& family, const std::string& id, prometheus::Labels labels,
         Args&&... args) {
    labels.emplace("job_id", id);
    return series.Get(family, id, labels, std::forward<Args>(args)...);
  }

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  JobSeries series;
  prometheus::Family<prometheus::Gauge>& job_state =
      prometheus::BuildGauge()
          .Name("pipetrain_job_state")
          .Help("1 for the job's current state, 0 for the states it left (lower-case state "
                "name).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& jobs =
      prometheus::BuildGauge().Name("pipetrain_jobs").Help("Jobs by state.").Register(*registry);
  prometheus::Family<prometheus::Counter>& submitted = prometheus::BuildCounter()
                                                           .Name("pipetrain_jobs_submitted_total")
                                                           .Help("Jobs accepted by SubmitJob.")
                                                           .Register(*registry);
  prometheus::Family<prometheus::Counter>& steps =
      prometheus::BuildCounter()
          .Name("pipetrain_job_steps_total")
          .Help("Completed training steps (every rank reported).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& step_duration =
      prometheus::BuildGauge()
          .Name("pipetrain_job_step_duration_seconds")
          .Help("Duration of the last completed step (slowest rank).")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& step_seconds =
      prometheus::BuildHistogram()
          .Name("pipetrain_job_step_seconds")
          .Help("Duration of every completed step (slowest rank).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& predicted_step =
      prometheus::BuildGauge()
          .Name("pipetrain_job_predicted_step_seconds")
          .Help("Step time predicted by the plan's simulation (at least the shared-CPU bound "
                "when CPU workers share a host's cores).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& loss =
      prometheus::BuildGauge()
          .Name("pipetrain_job_loss")
          .Help("Training loss of the last completed step.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& grad_norm =
      prometheus::BuildGauge()
          .Name("pipetrain_job_grad_norm")
          .Help("Global L2 norm of the weight gradients of the last completed step, before "
                "clipping.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& clipped_steps =
      prometheus::BuildCounter()
          .Name("pipetrain_job_clipped_steps_total")
          .Help("Completed steps whose gradients were scaled down by clip_grad_norm.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& tokens =
      prometheus::BuildGauge()
          .Name("pipetrain_job_tokens_per_second")
          .Help("Training throughput of the last completed step.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& bubble =
      prometheus::BuildGauge()
          .Name("pipetrain_job_bubble_ratio")
          .Help("Per-stage pipeline bubble (idle share of the busiest worker's own span), "
                "predicted by the plan or measured on the last step.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& step_bubble =
      prometheus::BuildGauge()
          .Name("pipetrain_job_step_bubble_ratio")
          .Help("Step bubble: 1 - all workers' compute / (workers x step time), the share of "
                "the step lost to idling, predicted by the plan or measured on the last step.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& rank_bubble =
      prometheus::BuildGauge()
          .Name("pipetrain_job_rank_bubble_ratio")
          .Help("Per rank: 1 - the rank's compute / the step time, the share of the step the "
                "rank spends idle, predicted by the plan or measured on the last step (the mean "
                "over ranks is the step bubble).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& peak =
      prometheus::BuildGauge()
          .Name("pipetrain_job_peak_activation_bytes")
          .Help("Peak activation bytes per rank, predicted by the plan or measured (max over "
                "the job's steps).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& device_peak =
      prometheus::BuildGauge()
          .Name("pipetrain_job_device_peak_bytes")
          .Help("All memory the worker's device allocator held at its peak, max over steps "
                "(weights, gradients, optimizer state, activations, workspace).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& workers = prometheus::BuildGauge()
                                                       .Name("pipetrain_workers")
                                                       .Help("Registered workers by state.")
                                                       .Register(*registry);
  prometheus::Family<prometheus::Counter>& heartbeats =
      prometheus::BuildCounter()
          .Name("pipetrain_worker_heartbeats_total")
          .Help("Worker heartbeats received.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& rpc_errors =
      prometheus::BuildCounter()
          .Name("pipetrain_coordinator_rpc_errors_total")
          .Help("Coordinator RPCs answered with a non-OK status.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& recoveries =
      prometheus::BuildCounter()
          .Name("pipetrain_job_recoveries_total")
          .Help("Times a job went RECOVERING (lost worker, failed step, coordinator restart).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& checkpoint_step =
      prometheus::BuildGauge()
          .Name("pipetrain_job_checkpoint_step")
          .Help("Newest complete checkpoint of the job (completed steps it holds).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& model_flops =
      prometheus::BuildGauge()
          .Name("pipetrain_job_model_flops_per_second")
          .Help("Model FLOPs per second of the last completed step (analytic FLOPs per step / step time).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& mfu =
      prometheus::BuildGauge()
          .Name("pipetrain_job_mfu_ratio")
          .Help("Model FLOPs utilisation of the last completed step: model FLOP/s / the job's peak (absent when the peak is unknown).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& peak_flops =
      prometheus::BuildGauge()
          .Name("pipetrain_job_peak_flops_per_second")
          .Help("Dense peak FLOP/s of the job's workers for its precision (absent when unknown).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& mean_tokens =
      prometheus::BuildGauge()
          .Name("pipetrain_job_mean_tokens_per_second")
          .Help("Tokens per second over every step the job ran.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& mean_model_flops =
      prometheus::BuildGauge()
          .Name("pipetrain_job_mean_model_flops_per_second")
          .Help("Model FLOPs per second over every step the job ran.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& mean_mfu =
      prometheus::BuildGauge()
          .Name("pipetrain_job_mean_mfu_ratio")
          .Help("Model FLOPs utilisation over every step the job ran (absent when the peak is unknown).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& learning_rate =
      prometheus::BuildGauge()
          .Name("pipetrain_job_learning_rate")
          .Help("Learning rate of the last completed step.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& val_loss =
      prometheus::BuildGauge()
          .Name("pipetrain_job_validation_loss")
          .Help("Mean loss of the newest validation pass.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& val_ppl =
      prometheus::BuildGauge()
          .Name("pipetrain_job_validation_perplexity")
          .Help("Perplexity (exp of the loss) of the newest validation pass.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& val_step =
      prometheus::BuildGauge()
          .Name("pipetrain_job_validation_step")
          .Help("Completed training steps when the newest validation pass ran.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& skipped =
      prometheus::BuildCounter()
          .Name("pipetrain_job_skipped_steps_total")
          .Help("Steps whose optimizer update every rank skipped (a gradient held a NaN or Inf).")
          .Register(*registry);
  prometheus::Counter& submitted_counter = submitted.Add({});
  prometheus::Counter& heartbeat_counter = heartbeats.Add({});
};

CoordinatorMetrics::CoordinatorMetrics(JobSeriesOptions job_series)
    : impl_(std::make_unique<Impl>(job_series)) {
  for (int s = v1::JobState_MIN; s <= v1::JobState_MAX; ++s) {
    if (s == v1::JOB_STATE_UNSPECIFIED || !v1::JobState_IsValid(s)) continue;
    impl_->jobs.Add({{"state", JobStateLabel(static_cast<v1::JobState>(s))}});
  }
  SetWorkerCounts(0, 0, 0);
}

CoordinatorMetrics::~CoordinatorMetrics() = default;

std::shared_ptr<prometheus::Collectable> CoordinatorMetrics::collectable() const {
  return impl_->series.collectable();
}

prometheus::Registry& CoordinatorMetrics::registry() { return *impl_->registry; }

std::vector<std::string> CoordinatorMetrics::JobsWithSeries() const {
  return impl_->series.Jobs();
}

void CoordinatorMetrics::JobSubmitted() { impl_->submitted_counter.Increment(); }

void CoordinatorMetrics::JobStateChanged(const std::string& job_id, v1::JobState from,
                                         v1::JobState to) {
  if (from == to) return;
  if (from != v1::JOB_STATE_UNSPECIFIED)
    impl_->jobs.Add({{"state", JobStateLabel(from)}}).Decrement();
  if (to != v1::JOB_STATE_UNSPECIFIED) impl_->jobs.Add({{"state", JobStateLabel(to)}}).Increment();
  // A job that had ended before this coordinator started: nothing per job.
  if (to == v1::JOB_STATE_UNSPECIFIED || (from == v1::JOB_STATE_UNSPECIFIED && Ended(to))) return;
  if (from != v1::JOB_STATE_UNSPECIFIED) {
    impl_->Job(impl_->job_state, job_id, {{"state", JobStateLabel(from)}}).Set(0);
  }
  impl_->Job(impl_->job_state, job_id, {{"state", JobStateLabel(to)}}).Set(1);
  if (Ended(to)) impl_->series.Ended(job_id);
}

void CoordinatorMetrics::JobPlanned(const std::string& job_id, const v1::Prediction& prediction) {
  impl_->Job(impl_->predicted_step, job_id, {}).Set(PredictedStepSeconds(prediction));
  impl_->Job(impl_->bubble, job_id, {{"kind", "predicted"}}).Set(prediction.bubble_ratio());
  impl_->Job(impl_->step_bubble, job_id, {{"kind", "predicted"}})
      .Set(prediction.step_bubble_ratio());
  const std::vector<double> busy(prediction.busy_s().begin(), prediction.busy_s().end());
  const std::vector<double> rank_bubbles = schedule::RankBubbles(busy, prediction.makespan_s());
  for (size_t r = 0; r < rank_bubbles.size(); ++r) {
    impl_->Job(impl_->rank_bubble, job_id, {{"rank", absl::StrCat(r)}, {"kind", "predicted"}})
        .Set(rank_bubbles[r]);
  }
  for (int r = 0; r < prediction.peak_activation_bytes_size(); ++r) {
    impl_->Job(impl_->peak, job_id, {{"rank", absl::StrCat(r)}, {"kind", "predicted"}})
        .Set(static_cast<double>(prediction.peak_activation_bytes(r)));
  }
}

void CoordinatorMetrics::JobStep(const v1::Job& job, const std::vector<double>& rank_bubbles) {
  const std::string& id = job.id();
  Impl& m = *impl_;
  m.Job(m.steps, id, {}).Increment();
  m.Job(m.step_duration, id, {}).Set(job.last_step_s());
  m.Job(m.step_seconds, id, {}, StepSecondsBuckets()).Observe(job.last_step_s());
  m.Job(m.loss, id, {}).Set(job.last_loss());
  if (job.grad_norms_size() > 0) {
    m.Job(m.grad_norm, id, {}).Set(job.grad_norms(job.grad_norms_size() - 1));
  }
  prometheus::Counter& clipped = m.Job(m.clipped_steps, id, {});
  if (job.clipped_steps_size() > 0 &&
      job.clipped_steps(job.clipped_steps_size() - 1) == job.steps_done() - 1) {
    clipped.Increment();
  }
  m.Job(m.tokens, id, {}).Set(job.tokens_per_s());
  m.Job(m.bubble, id, {{"kind", "measured"}}).Set(job.measured_bubble_ratio());
  m.Job(m.step_bubble, id, {{"kind", "measured"}}).Set(job.measured_step_bubble_ratio());
  for (size_t r = 0; r < rank_bubbles.size(); ++r) {
    m.Job(m.rank_bubble, id, {{"rank", absl::StrCat(r)}, {"kind", "measured"}})
        .Set(rank_bubbles[r]);
  }
  for (int r = 0; r < job.measured_peak_activation_bytes_size(); ++r) {
    m.Job(m.peak, id, {{"rank", absl::StrCat(r)}, {"kind", "measured"}})
        .Set(static_cast<double>(job.measured_peak_activation_bytes(r)));
  }
  for (int r = 0; r < job.measured_device_peak_bytes_size(); ++r) {
    m.Job(m.device_peak, id, {{"rank", absl::StrCat(r)}})
        .Set(static_cast<double>(job.measured_device_peak_bytes(r)));
  }
  m.Job(m.model_flops, id, {}).Set(job.model_flops_per_s());
  m.Job(m.mean_tokens, id, {}).Set(job.mean_tokens_per_s());
  m.Job(m.mean_model_flops, id, {}).Set(job.mean_model_flops_per_s());
  // Unknown peak: no MFU series at all, rather than a 0 that reads like a measurement.
  if (job.peak_flops_per_s() > 0) {
    m.Job(m.peak_flops, id, {}).Set(job.peak_flops_per_s());
    m.Job(m.mfu, id, {}).Set(job.mfu());
    m.Job(m.mean_mfu, id, {}).Set(job.mean_mfu());
  }
  m.Job(m.learning_rate, id, {}).Set(job.learning_rate());
  // The step just completed is the job's newest; count its skip, and its validation pass.
  prometheus::Counter& skipped = m.Job(m.skipped, id, {});
  if (job.skipped_steps_size() > 0 &&
      job.skipped_steps(job.skipped_steps_size() - 1) == job.steps_done() - 1) {
    skipped.Increment();
  }
  if (job.evaluations_size() > 0) {
    const v1::EvalResult& newest = job.evaluations(job.evaluations_size() - 1);
    m.Job(m.val_loss, id, {}).Set(newest.loss());
    m.Job(m.val_ppl, id, {}).Set(newest.perplexity());
    m.Job(m.val_step, id, {}).Set(newest.step());
  }
}

void CoordinatorMetrics::SetWorkerCounts(int idle, int busy, int lost) {
  impl_->workers.Add({{"state", "idle"}}).Set(idle);
  impl_->workers.Add({{"state", "busy"}}).Set(busy);
  impl_->workers.Add({{"state", "lost"}}).Set(lost);
}

void CoordinatorMetrics::Heartbeat() { impl_->heartbeat_counter.Increment(); }

void CoordinatorMetrics::JobRecovering(const std::string& job_id) {
  impl_->Job(impl_->recoveries, job_id, {}).Increment();
}

void CoordinatorMetrics::JobCheckpointed(const std::string& job_id, int64_t step) {
  impl_->Job(impl_->checkpoint_step, job_id, {}).Set(static_cast<double>(step));
}

void CoordinatorMetrics::RpcError(const std::string& method) {
  impl_->rpc_errors.Add({{"method", method}}).Increment();
}

}  // namespace pipetrain::coordinator
