#include "client/job_view.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/model_view.h"
#include "model/job_model.h"
#include "planner/shared_host.h"

namespace pipetrain::client {

std::string StateName(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  const std::string prefix = "JOB_STATE_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

std::string FormatJobLine(const v1::Job& job) {
  return absl::StrFormat(
      "%-12s %-20s %-20s step %d/%d  %s", job.id(), job.spec().name(), StateName(job.state()),
      job.steps_done(), job.spec().training().steps(),
      job.steps_done() > 0 ? absl::StrFormat("loss %.4f", job.last_loss()) : std::string());
}

std::string FormatJobStatus(const v1::Job& job) {
  std::string out =
      absl::StrFormat("%s  %s  %s  step %d/%d\n", job.id(), job.spec().name(),
                      StateName(job.state()), job.steps_done(), job.spec().training().steps());
  if (!job.failure_reason().empty())
    absl::StrAppend(&out, "  reason: ", job.failure_reason(), "\n");
  if (const std::string model_line = FormatModelLine(job.spec()); !model_line.empty()) {
    absl::StrAppend(&out, "  ", model_line, "\n");
  }
  if (const std::string lr = FormatLearningRateLine(job.spec(), job.steps_done()); !lr.empty()) {
    absl::StrAppend(&out, "  ", lr, "\n");
  }
  if (job.skipped_steps_size() > 0) {
    // The newest few; --json has them all.
    constexpr int kShown = 5;
    std::vector<std::string> shown;
    for (int i = std::max(0, job.skipped_steps_size() - kShown); i < job.skipped_steps_size();
         ++i) {
      shown.push_back(absl::StrCat(job.skipped_steps(i)));
    }
    absl::StrAppendFormat(&out, "  skipped updates (non-finite gradients): %d step(s)%s %s\n",
                          job.skipped_steps_size(),
                          job.skipped_steps_size() > kShown ? ", newest:" : ":",
                          absl::StrJoin(shown, ", "));
  }
  if (job.grad_norms_size() > 0) {
    const double max_norm = job.spec().training().optimizer().clip_grad_norm();
    absl::StrAppendFormat(
        &out, "  gradient norm: %.4g (last step)%s\n", job.grad_norms(job.grad_norms_size() - 1),
        max_norm > 0 ? absl::StrFormat("; clipped at %g: %d of %d steps", max_norm,
                                       job.clipped_steps_size(), job.grad_norms_size())
                     : std::string("; no clipping"));
  }
  const v1::Plan& plan = job.plan();
  if (plan.num_stages() > 0) {
    const int p = plan.workers_size();
    absl::StrAppendFormat(&out, "  plan: %s on %d workers x %d chunks, %d microbatches; costs %s\n",
                          plan.schedule(), p, p > 0 ? plan.num_stages() / p : 0,
                          plan.num_microbatches(),
                          plan.costs_measured() ? "measured (profiling step)" : "analytic");
  }
  if (job.transport() == v1::TRANSPORT_KIND_NCCL) {
    absl::StrAppendFormat(&out, "  transport: NCCL, a GPU per rank%s\n",
                          model::DataParallelSize(job.spec()) > 1
                              ? "; a communicator per replica's pipeline and per stage group"
                              : "");
  } else if (job.transport() == v1::TRANSPORT_KIND_TCP) {
    out += job.spec().compute().device() == v1::DEVICE_KIND_CUDA
               ? "  transport: TCP, device tensors staged through host memory\n"
               : "  transport: TCP\n";
  }
  const v1::CheckpointSpec& ckpt = job.spec().checkpoint();
  if (!ckpt.dir().empty() && ckpt.interval_steps() > 0) {
    absl::StrAppendFormat(&out, "  checkpoints: every %d steps in %s; newest complete: %s\n",
                          ckpt.interval_steps(), ckpt.dir(),
                          job.checkpoint_step() > 0 ? absl::StrCat("step ", job.checkpoint_step())
                                                    : std::string("none yet"));
  }
  if (job.recoveries_size() > 0) {
    const int budget = std::max(0, model::WithDefaults(job.spec()).max_restarts());
    absl::StrAppendFormat(&out, "  recoveries: %d (restarts %d of %d)\n", job.recoveries_size(),
                          job.restarts(), budget);
    // The newest few; GetJob --json has them all.
    constexpr int kShown = 3;
    for (int i = std::max(0, job.recoveries_size() - kShown); i < job.recoveries_size(); ++i) {
      const v1::JobRecovery& r = job.recoveries(i);
      absl::StrAppendFormat(&out, "    resumed from step %d%s: %s\n", r.resume_step(),
                            r.counted() ? "" : " (not counted)", r.reason());
    }
  }
  if (job.steps_done() > 0) {
    absl::StrAppendFormat(&out, "  loss %.4f (first %.4f)", job.last_loss(),
                          job.losses_size() > 0 ? job.losses(0) : job.last_loss());
    if (job.last_accuracy() > 0)
      absl::StrAppendFormat(&out, "  accuracy %.3f", job.last_accuracy());
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, FormatValidation(job));
  const v1::Prediction& pred = plan.prediction();
  if (plan.num_stages() > 0) {
    absl::StrAppendFormat(&out, "                 predicted   measured\n");
    // CPU workers sharing a host's cores: the shared-core simulation (coordinator/shared_cpu.h);
    // data parallelism: the step with the gradient sums across replicas.
    const double step = planner::ExpectedStepSeconds(pred);
    absl::StrAppendFormat(&out, "  step time      %8.4f s  %s\n", step,
                          job.steps_done() > 0 ? absl::StrFormat("%8.4f s", job.last_step_s())
                                               : std::string("       -"));
    if (pred.shared_cpu_step_s() > 0) absl::StrAppend(&out, "    (", pred.shared_cpu_note(), ")\n");
    // Both bubbles: the step's (what the idling costs) and the per-stage one the papers print.
    absl::StrAppendFormat(&out, "  step bubble    %8.3f    %s\n", pred.step_bubble_ratio(),
                          job.steps_done() > 0
                              ? absl::StrFormat("%8.3f", job.measured_step_bubble_ratio())
                              : std::string("       -"));
    absl::StrAppendFormat(&out, "  bubble ratio   %8.3f    %s   (per stage)\n", pred.bubble_ratio(),
                          job.steps_done() > 0
                              ? absl::StrFormat("%8.3f", job.measured_bubble_ratio())
                              : std::string("       -"));
    if (pred.shared_cpu_step_s() > 0) {
      absl::StrAppend(&out, "    (predicted with a device per worker; measured, it also counts "
                            "the time a worker waits for a shared core)\n");
    }
    absl::StrAppend(&out, FormatThroughput(job));
    absl::StrAppend(&out,
                    "  peak activation memory per worker (MiB), predicted / measured; and all "
                    "memory the worker's allocator held (weights, optimizer, workspace too):\n");
    for (int r = 0; r < pred.peak_activation_bytes_size(); ++r) {
      const double predicted = pred.peak_activation_bytes(r) / 1048576.0;
      std::string measured = "-", device = "";
      if (r < job.measured_peak_activation_bytes_size()) {
        measured = absl::StrFormat("%.3f", job.measured_peak_activation_bytes(r) / 1048576.0);
      }
      if (r < job.measured_device_peak_bytes_size() && job.measured_device_peak_bytes(r) > 0) {
        device = absl::StrFormat("; all %.3f", job.measured_device_peak_bytes(r) / 1048576.0);
      }
      absl::StrAppendFormat(&out, "    rank %d: %.3f / %s%s\n", r, predicted, measured, device);
    }
  }
  return out;
}

std::string FormatValidation(const v1::Job& job) {
  const v1::EvalSpec& eval = job.spec().eval();
  if (eval.interval_steps() <= 0) return "";
  if (job.evaluations_size() == 0) {
    return absl::StrFormat("  validation: every %d steps on %d microbatches; none yet\n",
                           eval.interval_steps(), eval.batches());
  }
  const v1::EvalResult& first = job.evaluations(0);
  const v1::EvalResult& last = job.evaluations(job.evaluations_size() - 1);
  return absl::StrFormat(
      "  validation loss %.4f, perplexity %.2f at step %d (first %.4f at step %d; %d pass(es), "
      "every %d steps on %d microbatches)\n",
      last.loss(), last.perplexity(), last.step(), first.loss(), first.step(),
      job.evaluations_size(), eval.interval_steps(), eval.batches());
}

namespace {

// A percentage with `decimals` places, or two significant digits when that would print 0 (a
// tiny model on a GPU reaches a few millionths of its peak).
std::string Percent(double fraction, int decimals) {
  const double percent = 100 * fraction;
  if (percent > 0 && percent < 0.5 * std::pow(10.0, -decimals)) {
    return absl::StrFormat("%.2g%%", percent);
  }
  return absl::StrFormat("%.*f%%", decimals, percent);
}

// A FLOP rate in GFLOP/s, or TFLOP/s from 1000 GFLOP/s on (a GPU's peak).
std::string FlopRate(double flops_per_s) {
  if (flops_per_s >= 1e12) return absl::StrFormat("%.4g TFLOP/s", flops_per_s / 1e12);
  return absl::StrFormat("%.4g GFLOP/s", flops_per_s / 1e9);
}

}  // namespace

std::string FormatThroughput(const v1::Job& job) {
  if (job.timed_steps() <= 0) return "";
  std::string out = absl::StrFormat(
      "  last step / whole job: %.0f / %.0f tokens/s, %.3f / %.3f model GFLOP/s (%.4g GFLOP per "
      "step)\n",
      job.tokens_per_s(), job.mean_tokens_per_s(), job.model_flops_per_s() / 1e9,
      job.mean_model_flops_per_s() / 1e9, job.model_flops_per_step() / 1e9);
  if (job.peak_flops_per_s() > 0) {
    absl::StrAppendFormat(&out, "  MFU %s / %s of %s peak (%s)\n", Percent(job.mfu(), 2),
                          Percent(job.mean_mfu(), 2), FlopRate(job.peak_flops_per_s()),
                          job.peak_flops_source());
  } else {
    absl::StrAppendFormat(&out, "  MFU unknown (%s)\n",
                          job.peak_flops_source().empty() ? "no peak" : job.peak_flops_source());
  }
  absl::StrAppendFormat(&out, "  learning rate of the last step %.6g\n", job.learning_rate());
  return out;
}

std::string FormatProgress(const v1::Job& job, int width) {
  const int total = std::max(1, job.spec().training().steps());
  const int done = std::min(job.steps_done(), total);
  const int filled = width * done / total;
  std::string bar(filled, '=');
  if (filled < width) bar += '>';
  bar.resize(width, ' ');
  std::string line = absl::StrFormat("[%s] step %d/%d", bar, done, total);
  if (done > 0) {
    absl::StrAppendFormat(&line, "  loss %.4f", job.last_loss());
    if (job.evaluations_size() > 0) {
      const v1::EvalResult& newest = job.evaluations(job.evaluations_size() - 1);
      absl::StrAppendFormat(&line, "  val %.4f (ppl %.2f @%d)", newest.loss(), newest.perplexity(),
                            newest.step());
    }
    if (job.tokens_per_s() > 0) absl::StrAppendFormat(&line, "  %.0f tok/s", job.tokens_per_s());
    if (job.peak_flops_per_s() > 0 && job.mfu() > 0) {
      absl::StrAppendFormat(&line, "  MFU %s", Percent(job.mfu(), 1));
    }
    if (job.last_step_s() > 0 && done < total) {
      const int eta = static_cast<int>(std::lround(job.last_step_s() * (total - done)));
      absl::StrAppendFormat(&line, "  ETA %d:%02d", eta / 60, eta % 60);
    }
  }
  return line;
}

std::string FormatLossCurve(const v1::Job& job) {
  if (job.losses_size() == 0) return "no completed steps\n";
  const auto& l = job.losses();
  const double lo = *std::min_element(l.begin(), l.end());
  const double hi = *std::max_element(l.begin(), l.end());
  static const char* kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string spark;
  const int points = std::min(60, l.size());
  for (int i = 0; i < points; ++i) {
    const double v = l[i * l.size() / points];
    const int level = hi > lo ? static_cast<int>(std::lround(7 * (v - lo) / (hi - lo))) : 0;
    spark += kBlocks[level];
  }
  return absl::StrFormat("loss: first %.4f, lowest %.4f, last %.4f over %d steps\n  %s\n", l[0], lo,
                         l[l.size() - 1], l.size(), spark);
}

}  // namespace pipetrain::client
