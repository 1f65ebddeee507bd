#include "coordinator/step_aggregator.h"

#include <algorithm>
#include <cmath>

#include "schedule/bubble.h"

namespace pipetrain::coordinator {
namespace {

bool IsCompute(v1::ActionKind kind) {
  return kind == v1::ACTION_KIND_F || kind == v1::ACTION_KIND_B || kind == v1::ACTION_KIND_W ||
         kind == v1::ACTION_KIND_BW || kind == v1::ACTION_KIND_OVERLAP_F;
}

template <typename RankSteps>
std::vector<double> RankBubbleRatios(const RankSteps& ranks) {
  std::vector<double> busy;
  int64_t step_ns = 0;
  for (const auto& r : ranks) {
    if (!r->has_timings) return {};
    busy.push_back(static_cast<double>(r->compute_ns));
    step_ns = std::max(step_ns, r->report.step_duration_ns());
  }
  return schedule::RankBubbles(busy, static_cast<double>(step_ns));
}

}  // namespace

StepAggregator::StepAggregator(int num_ranks, StepWork work, int first_step)
    : num_ranks_(num_ranks), work_(work), next_step_(first_step) {}

std::vector<CompletedStep> StepAggregator::Add(const v1::StepReport& report, v1::Job* job) {
  std::vector<CompletedStep> completed;
  const int rank = report.rank();
  const int step = report.step();
  if (rank < 0 || rank >= num_ranks_ || step < next_step_) return completed;
  std::vector<std::optional<RankStep>>& ranks = pending_[step];
  if (ranks.empty()) ranks.resize(num_ranks_);
  if (ranks[rank].has_value()) return completed;
  RankStep& rs = ranks[rank].emplace();
  for (const v1::ActionTiming& t : report.timings()) {
    rs.has_timings = true;
    if (IsCompute(t.action().kind()))
      rs.compute_ns += std::max<int64_t>(0, t.end_ns() - t.start_ns());
  }
  rs.report = report;

  // Apply complete steps in order.
  for (auto it = pending_.begin(); it != pending_.end() && it->first == next_step_;
       it = pending_.erase(it)) {
    std::vector<std::optional<RankStep>>& all = it->second;
    if (std::any_of(all.begin(), all.end(), [](const auto& r) { return !r.has_value(); })) break;
    Apply(all, job);
    CompletedStep& done = completed.emplace_back();
    const RankStep* loss_rank = &*all.back();
    for (const auto& r : all) {
      if (r->report.has_loss()) loss_rank = &*r;
    }
    done.rank_bubble_ratios = RankBubbleRatios(all);
    done.summary = loss_rank->report;
    done.summary.clear_timings();
    done.trace.set_step(it->first);
    for (auto& r : all) *done.trace.add_ranks() = std::move(r->report);
    ++next_step_;
  }
  return completed;
}

void StepAggregator::Apply(const std::vector<std::optional<RankStep>>& ranks, v1::Job* job) const {
  job->set_steps_done(std::max(job->steps_done(), ranks.front()->report.step() + 1));
  while (job->measured_peak_activation_bytes_size() < num_ranks_) {
    job->add_measured_peak_activation_bytes(0);
  }
  while (job->measured_device_peak_bytes_size() < num_ranks_) {
    job->add_measured_device_peak_bytes(0);
  }
  int64_t max_duration_ns = 0, max_compute_ns = 0, total_compute_ns = 0;
  bool any_timings = false;
  for (int r = 0; r < num_ranks_; ++r) {
    const RankStep& rs = *ranks[r];
    const v1::StepReport& report = rs.report;
    if (report.has_loss()) {
      job->add_losses(report.loss());
      job->set_last_loss(report.loss());
      job->set_last_accuracy(report.accuracy());
    }
    job->set_measured_peak_activation_bytes(
        r, std::max(job->measured_peak_activation_bytes(r), report.peak_activation_bytes()));
    job->set_measured_device_peak_bytes(
        r, std::max(job->measured_device_peak_bytes(r), report.device_peak_bytes()));
    max_duration_ns = std::max(max_duration_ns, report.step_duration_ns());
    if (rs.has_timings) {
      any_timings = true;
      max_compute_ns = std::max(max_compute_ns, rs.compute_ns);
      total_compute_ns += rs.compute_ns;
    }
  }
  // The ranks agree on a skipped update (worker/runtime/executor.h); one report says it.
  if (std::any_of(ranks.begin(), ranks.end(),
                  [](const auto& r) { return r->report.update_skipped(); })) {
    job->add_skipped_steps(ranks.front()->report.step());
  }
  // The rank holding stage 0 reports the global gradient norm and the clipping.
  for (const auto& r : ranks) {
    if (!r->report.has_grad_norm()) continue;
    job->add_grad_norms(r->report.grad_norm());
    if (r->report.grad_clipped()) job->add_clipped_steps(r->report.step());
    break;
  }
  const double step_s = static_cast<double>(max_duration_ns) * 1e-9;
  job->set_last_step_s(step_s);
  const double tokens = static_cast<double>(work_.tokens_per_step);
  const double flops = work_.model_flops_per_step;
  const double peak = work_.peak_flops_per_s;
  job->set_tokens_per_s(step_s > 0 ? tokens / step_s : 0.0);
  job->set_model_flops_per_step(flops);
  job->set_model_flops_per_s(step_s > 0 ? flops / step_s : 0.0);
  job->set_mfu(step_s > 0 && peak > 0 ? flops / step_s / peak : 0.0);
  job->set_trained_s(job->trained_s() + step_s);
  job->set_timed_steps(job->timed_steps() + 1);
  if (job->trained_s() > 0) {
    const double total_s = job->trained_s();
    const double steps = static_cast<double>(job->timed_steps());
    job->set_mean_tokens_per_s(tokens * steps / total_s);
    job->set_mean_model_flops_per_s(flops * steps / total_s);
    job->set_mean_mfu(peak > 0 ? flops * steps / total_s / peak : 0.0);
  }
  const v1::StepReport* loss_report = &ranks.back()->report;
  for (const auto& r : ranks) {
    if (r->report.has_loss()) loss_report = &r->report;
  }
  job->set_learning_rate(loss_report->learning_rate());
  job->add_learning_rates(loss_report->learning_rate());
  if (loss_report->evaluated() && loss_report->has_val_loss()) {
    v1::EvalResult result;
    result.set_step(loss_report->step() + 1);
    result.set_loss(loss_report->val_loss());
    result.set_perplexity(std::exp(loss_report->val_loss()));
    result.set_duration_s(static_cast<double>(loss_report->eval_duration_ns()) * 1e-9);
    // In step order; a redone step (after a recovery) replaces its earlier pass.
    auto* evals = job->mutable_evaluations();
    auto at = std::find_if(evals->begin(), evals->end(),
                           [&](const v1::EvalResult& e) { return e.step() >= result.step(); });
    if (at != evals->end() && at->step() == result.step()) {
      *at = result;
    } else {
      const int index = static_cast<int>(at - evals->begin());
      evals->Add(std::move(result));
      for (int i = evals->size() - 1; i > index; --i) evals->SwapElements(i, i - 1);
    }
  }
  if (any_timings && max_duration_ns > 0) {
    const double busy = static_cast<double>(max_compute_ns) / static_cast<double>(max_duration_ns);
    job->set_measured_bubble_ratio(std::clamp(1.0 - busy, 0.0, 1.0));
    // The step bubble: all ranks' compute against ranks x the step (the longest rank's step).
    const double work = static_cast<double>(total_compute_ns) /
                        (static_cast<double>(num_ranks_) * static_cast<double>(max_duration_ns));
    job->set_measured_step_bubble_ratio(std::clamp(1.0 - work, 0.0, 1.0));
  }
}

}  // namespace pipetrain::coordinator
