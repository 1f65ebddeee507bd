#include "client/report.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "planner/shared_host.h"
#include "schedule/bubble.h"
#include "schedule/codec/plan_proto.h"
#include "schedule/data_parallel_step.h"
#include "schedule/render_plot.h"
#include "schedule/render_svg.h"

namespace pipetrain::client {
namespace {

using schedule::ActionKind;

// Actions after which the executor records the worker's resident activation bytes.
bool RecordsResidentBytes(ActionKind kind) {
  return schedule::IsCompute(kind) || schedule::IsOffload(kind);
}

// A display unit for byte values up to `max_bytes`.
std::pair<double, const char*> ByteUnit(double max_bytes) {
  if (max_bytes >= (1 << 20)) return {1 << 20, "MiB"};
  if (max_bytes >= (1 << 10)) return {1 << 10, "KiB"};
  return {1, "bytes"};
}

// Seconds -> milliseconds for drawing.
schedule::SimResult InMs(schedule::SimResult sim) {
  for (schedule::TimedAction& t : sim.timeline) {
    t.start *= 1e3;
    t.end *= 1e3;
  }
  sim.makespan *= 1e3;
  return sim;
}

std::vector<schedule::GradientSumInterval> InMs(std::vector<schedule::GradientSumInterval> sums) {
  for (schedule::GradientSumInterval& g : sums) {
    g.start *= 1e3;
    g.end *= 1e3;
  }
  return sums;
}

const char* const kWorkerColours[] = {"#3e6fc2", "#e07b1f", "#1f9a78", "#c23e5a",
                                      "#7b4fc0", "#8c6d31", "#d45fb0", "#5b8c2a"};

// The earliest action start of ranks first..first+count-1: the origin MeasuredStep and
// MeasuredTimeline put at 0.
int64_t Origin(const v1::StepTrace& trace, int first, int count) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (int r = first; r < first + count && r < trace.ranks_size(); ++r) {
    for (const v1::ActionTiming& t : trace.ranks(r).timings()) {
      origin = std::min<int64_t>(origin, t.start_ns());
    }
  }
  return origin == std::numeric_limits<int64_t>::max() ? 0 : origin;
}

std::vector<schedule::GradientSumInterval> MeasuredGradientSums(const v1::StepTrace& trace,
                                                                int first, int count) {
  const int64_t origin = Origin(trace, first, count);
  std::vector<schedule::GradientSumInterval> out;
  for (int r = first; r < first + count && r < trace.ranks_size(); ++r) {
    for (const v1::GradientSum& g : trace.ranks(r).gradient_sums()) {
      out.push_back({r - first, g.stage(), (g.start_ns() - origin) * 1e-9,
                     (g.end_ns() - origin) * 1e-9});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<schedule::SimResult> MeasuredStep(const schedule::Schedule& schedule,
                                                 const v1::StepTrace& trace) {
  const int p = schedule.num_workers;
  // Data parallelism: d x p ranks, replica 0's first.
  if (trace.ranks_size() != p && (p == 0 || trace.ranks_size() % p != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("trace.ranks: ", trace.ranks_size(),
                                                   " ranks reported, the plan has ", p,
                                                   " workers (per replica)"));
  }
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (int r = 0; r < p; ++r) {
    const v1::StepReport& rank = trace.ranks(r);
    const auto& list = schedule.worker_actions[r];
    if (rank.timings_size() != static_cast<int>(list.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace.ranks[", r, "].timings: ", rank.timings_size(), " timings, the plan gives worker ",
          r, " ", list.size(), " actions"));
    }
    for (int i = 0; i < rank.timings_size(); ++i) {
      const v1::ActionTiming& t = rank.timings(i);
      const schedule::Action& a = list[i];
      if (t.action().kind() != schedule::ActionKindToProto(a.kind) ||
          t.action().stage() != a.stage || t.action().microbatch() != a.microbatch) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trace.ranks[", r, "].timings[", i, "]: action (kind ", t.action().kind(), ", stage ",
            t.action().stage(), ", microbatch ", t.action().microbatch(),
            ") is not the plan's action ", schedule::ToString(a), " at that position"));
      }
      if (t.end_ns() < t.start_ns()) {
        return absl::InvalidArgumentError(absl::StrCat("trace.ranks[", r, "].timings[", i,
                                                       "]: end_ns < start_ns"));
      }
      origin = std::min<int64_t>(origin, t.start_ns());
    }
  }
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;

  schedule::SimResult out;
  out.busy.assign(p, 0.0);
  out.span.assign(p, 0.0);
  out.peak_memory.assign(p, 0.0);
  out.memory_curve.assign(p, {});
  double first = std::numeric_limits<double>::max(), last = 0.0;
  for (int r = 0; r < p; ++r) {
    const v1::StepReport& rank = trace.ranks(r);
    double w_first = std::numeric_limits<double>::max(), w_last = 0.0;
    for (int i = 0; i < rank.timings_size(); ++i) {
      const v1::ActionTiming& t = rank.timings(i);
      const schedule::Action& a = schedule.worker_actions[r][i];
      const double start = (t.start_ns() - origin) * 1e-9, end = (t.end_ns() - origin) * 1e-9;
      out.timeline.push_back(schedule::TimedAction{a, r, start, end});
      if (schedule::IsCompute(a.kind)) out.busy[r] += end - start;
      if (RecordsResidentBytes(a.kind)) {
        if (out.memory_curve[r].empty()) out.memory_curve[r].push_back({start, 0.0});
        const double level = static_cast<double>(t.bytes());
        out.memory_curve[r].push_back({end, level});
        out.peak_memory[r] = std::max(out.peak_memory[r], level);
      }
      w_first = std::min(w_first, start);
      w_last = std::max(w_last, end);
    }
    if (rank.timings_size() > 0) {
      out.span[r] = w_last - w_first;
      first = std::min(first, w_first);
      last = std::max(last, w_last);
    }
  }
  out.makespan = last > first ? last - first : 0.0;
  out.bubble_ratio = schedule::PerStageBubble(out.busy, out.span);
  out.step_bubble_ratio = schedule::StepBubble(out.busy, out.makespan);
  return out;
}

namespace {

// JobReport::cpu_use of the ranks MeasuredStep shows (it checked that their timings are the
// plan's actions).
std::vector<JobReport::CpuUse> CpuUseOf(const schedule::Schedule& schedule,
                                        const schedule::CostModel& costs,
                                        const v1::StepTrace& trace) {
  const char* const kGroups[] = {"F", "B", "W", "BW", "sends", "receives"};
  std::vector<JobReport::CpuUse> use(std::size(kGroups));
  for (size_t g = 0; g < use.size(); ++g) use[g].group = kGroups[g];
  bool any = false;
  for (int r = 0; r < schedule.num_workers && r < trace.ranks_size(); ++r) {
    const v1::StepReport& rank = trace.ranks(r);
    for (int i = 0; i < rank.timings_size(); ++i) {
      const v1::ActionTiming& t = rank.timings(i);
      const schedule::Action& a = schedule.worker_actions[r][i];
      const schedule::StageCost& c = costs.stages[a.stage];
      int g = schedule::IsSend(a.kind) ? 4 : (schedule::IsRecv(a.kind) ? 5 : -1);
      double planned = 0;
      if (a.kind == schedule::ActionKind::kF) g = 0, planned = c.f;
      if (a.kind == schedule::ActionKind::kB) g = 1, planned = c.b;
      if (a.kind == schedule::ActionKind::kW) g = 2, planned = c.w;
      if (a.kind == schedule::ActionKind::kBW) g = 3, planned = c.FusedBackward();
      if (g < 0) continue;
      use[g].cpu_s += t.cpu_ns() * 1e-9;
      use[g].wall_s += (t.end_ns() - t.start_ns()) * 1e-9;
      use[g].planned_s += planned;
      ++use[g].actions;
      any |= t.cpu_ns() > 0;
    }
  }
  if (!any) return {};
  use.erase(std::remove_if(use.begin(), use.end(),
                           [](const JobReport::CpuUse& u) { return u.actions == 0; }),
            use.end());
  return use;
}

}  // namespace

absl::StatusOr<JobReport> BuildJobReport(const v1::Plan& plan, const v1::StepTrace& trace,
                                         std::optional<double> replay_host_cores,
                                         double message_cpu_s) {
  JobReport report;
  report.job_id = trace.job_id();
  report.step = trace.step();
  PT_ASSIGN_OR_RETURN(report.schedule, schedule::ScheduleFromProto(plan));
  const schedule::CostModel costs = schedule::CostModelFromProto(plan);
  if (static_cast<int>(costs.stages.size()) != report.schedule.num_stages) {
    return absl::InvalidArgumentError(absl::StrCat("plan.costs: ", costs.stages.size(),
                                                   " stage costs for ",
                                                   report.schedule.num_stages, " stages"));
  }
  PT_ASSIGN_OR_RETURN(report.predicted, schedule::Simulate(report.schedule, costs));
  PT_ASSIGN_OR_RETURN(report.measured, MeasuredStep(report.schedule, trace));
  report.cpu_use = CpuUseOf(report.schedule, costs, trace);
  const v1::Prediction& prediction = plan.prediction();
  report.replicas = std::max(1, plan.data_parallel());
  report.expected_step_s = planner::ExpectedStepSeconds(prediction);
  if (report.replicas > 1 &&
      prediction.stage_allreduce_s_size() == report.schedule.num_stages) {
    const std::vector<double> sums(prediction.stage_allreduce_s().begin(),
                                   prediction.stage_allreduce_s().end());
    PT_ASSIGN_OR_RETURN(const schedule::DataParallelStep step,
                        schedule::SimulateDataParallelStep(report.schedule, report.predicted,
                                                           sums));
    report.predicted_sums = schedule::PredictedGradientSums(report.schedule, step);
    report.measured_sums = MeasuredGradientSums(trace, 0, report.schedule.num_workers);
  }
  if (replay_host_cores.has_value()) {
    report.replay_host_cores = *replay_host_cores;
    absl::StatusOr<StepReplay> replay =
        ReplayStep(report.schedule, costs, trace, *replay_host_cores, report.replicas,
                   *replay_host_cores > 0 ? message_cpu_s : 0.0);
    if (replay.ok()) {
      report.replay = std::move(*replay);
    } else {
      report.replay_note = std::string(replay.status().message());
    }
  }
  return report;
}

std::string FormatJobReport(const JobReport& r) {
  std::string out = absl::StrFormat(
      "job %s step %d: schedule %s, %d workers, %d microbatches\n", r.job_id, r.step,
      r.schedule.name, r.schedule.num_workers, r.schedule.num_microbatches);
  const double ratio = r.predicted.makespan > 0 ? r.measured.makespan / r.predicted.makespan : 0;
  absl::StrAppendFormat(&out, "step time: predicted %.3f ms, measured %.3f ms (measured/predicted %.3f)\n",
                        r.predicted.makespan * 1e3, r.measured.makespan * 1e3, ratio);
  absl::StrAppendFormat(&out, "bubble ratio: predicted %.4f, measured %.4f\n",
                        r.predicted.bubble_ratio, r.measured.bubble_ratio);
  absl::StrAppendFormat(&out,
                        "step bubble (idle share of workers x step time): predicted %.4f, "
                        "measured %.4f\n",
                        r.predicted.step_bubble_ratio, r.measured.step_bubble_ratio);
  if (r.replicas > 1) {
    absl::StrAppendFormat(&out,
                          "data parallel: %d replicas, replica 0's ranks shown; the step the "
                          "plan expects with the gradient sums (and shared cores, if any): "
                          "%.3f ms\n",
                          r.replicas, r.expected_step_s * 1e3);
    out += "gradient sums per stage, ms (predicted / measured on replica 0):";
    for (const schedule::GradientSumInterval& p : r.predicted_sums) {
      double measured = -1;
      for (const schedule::GradientSumInterval& m : r.measured_sums) {
        if (m.stage == p.stage) measured = m.end - m.start;
      }
      absl::StrAppendFormat(&out, " s%d %.3f / %s", p.stage, (p.end - p.start) * 1e3,
                            measured >= 0 ? absl::StrFormat("%.3f", measured * 1e3) : "-");
    }
    out += "\n";
  }
  if (!r.cpu_use.empty()) {
    out += "CPU time in the actions (the ranks shown):";
    for (const JobReport::CpuUse& u : r.cpu_use) {
      if (u.planned_s > 0) {
        absl::StrAppendFormat(&out, " %s %.3f ms = %.2f x the plan's;", u.group, u.cpu_s * 1e3,
                              u.cpu_s / u.planned_s);
      } else {
        absl::StrAppendFormat(&out, " %s %.3f ms in %.3f ms;", u.group, u.cpu_s * 1e3,
                              u.wall_s * 1e3);
      }
    }
    out.back() = '\n';
  }
  if (r.replay) {
    const StepReplay& x = *r.replay;
    const std::string where =
        r.replay_host_cores > 0
            ? absl::StrFormat("the %d ranks sharing %g cores", r.replicas * r.schedule.num_workers,
                              r.replay_host_cores)
            : std::string("a device per rank");
    const std::string hop =
        x.hops_measured > 0
            ? absl::StrFormat("hop %.3f ms, the mean over %d messages", x.hop_s * 1e3,
                              x.hops_measured)
            : absl::StrFormat("hop %.3f ms, the plan's (none measurable)", x.hop_s * 1e3);
    const std::string message_cpu =
        x.message_cpu_s > 0
            ? absl::StrFormat("; each message %.0f us of the cores' CPU, the planner's figure",
                              x.message_cpu_s * 1e6)
            : std::string();
    absl::StrAppendFormat(&out,
                          "replayed with the step's own costs (each stage's F, B, W at their "
                          "mean CPU time; %s%s), %s: %.3f ms (measured/replayed %.3f)\n",
                          hop, message_cpu, where, x.step_s * 1e3,
                          x.step_s > 0 ? r.measured.makespan / x.step_s : 0.0);
  } else if (!r.replay_note.empty()) {
    out += "no replay: " + r.replay_note + "\n";
  }
  out += "peak activation bytes per worker (predicted / measured):";
  for (int w = 0; w < r.schedule.num_workers; ++w) {
    absl::StrAppendFormat(&out, " w%d %.0f / %.0f", w, r.predicted.peak_memory[w],
                          r.measured.peak_memory[w]);
  }
  out += "\n";
  return out;
}

std::string RenderJobReportSvg(const JobReport& r) {
  const schedule::SimResult predicted = InMs(r.predicted), measured = InMs(r.measured);
  const double end = std::max({predicted.makespan, measured.makespan, 1e-6});
  // One time scale for both charts: the longer one is about 1100 px wide.
  schedule::SvgOptions options;
  options.time_end = end;
  options.px_per_time = 1100.0 / end;
  options.time_label = "ms";
  options.gradient_sums = InMs(r.predicted_sums);
  options.title = absl::StrFormat(
      "predicted (simulator, plan costs): step %.3f ms, step bubble %.4f, per-stage bubble %.4f",
      predicted.makespan, predicted.step_bubble_ratio, predicted.bubble_ratio);
  const std::string predicted_svg = schedule::RenderSvg(r.schedule, predicted, options);
  options.gradient_sums = InMs(r.measured_sums);
  options.title = absl::StrFormat(
      "measured (step %d): step %.3f ms, step bubble %.4f, per-stage bubble %.4f", r.step,
      measured.makespan, measured.step_bubble_ratio, measured.bubble_ratio);
  const std::string measured_svg = schedule::RenderSvg(r.schedule, measured, options);

  double max_bytes = 0;
  for (int w = 0; w < r.schedule.num_workers; ++w) {
    max_bytes = std::max({max_bytes, r.predicted.peak_memory[w], r.measured.peak_memory[w]});
  }
  const auto [unit, unit_name] = ByteUnit(max_bytes);
  schedule::Plot memory;
  memory.title = "activation memory per worker over the step (dashed: predicted, solid: measured)";
  memory.x.label = "ms since the step's first action";
  memory.x.min = 0;
  memory.x.max = end;
  memory.y.label = absl::StrCat("resident activations (", unit_name, ")");
  memory.y.from_zero = true;
  memory.width = 70 + 1100 + 190;  // plot area under the Gantt charts' time axis
  for (int w = 0; w < r.schedule.num_workers; ++w) {
    const std::string colour = kWorkerColours[w % 8];
    for (int side = 0; side < 2; ++side) {
      const auto& curve = side == 0 ? r.predicted.memory_curve[w] : r.measured.memory_curve[w];
      schedule::PlotSeries s;
      s.style = schedule::PlotSeries::Style::kStep;
      s.colour = colour;
      s.dashed = side == 0;
      if (side == 1) s.label = absl::StrCat("worker ", w);
      for (const schedule::MemoryPoint& pt : curve) {
        s.x.push_back(pt.time * 1e3);
        s.y.push_back(pt.units / unit);
      }
      // Hold the last level to the end of the step.
      if (!s.x.empty()) {
        s.x.push_back(end);
        s.y.push_back(s.y.back());
      }
      memory.series.push_back(std::move(s));
    }
  }
  const std::string memory_svg = schedule::RenderPlot(memory);

  const std::string summary = FormatJobReport(r);
  std::vector<std::string> lines;
  for (size_t start = 0; start < summary.size();) {
    const size_t nl = summary.find('\n', start);
    lines.push_back(summary.substr(start, nl - start));
    start = nl == std::string::npos ? summary.size() : nl + 1;
  }
  const double header = 14 + 16.0 * lines.size();
  const double h1 = schedule::SvgHeight(predicted_svg), h2 = schedule::SvgHeight(measured_svg);
  const double h3 = schedule::SvgHeight(memory_svg);
  const double width = std::max({schedule::SvgWidth(predicted_svg),
                                 schedule::SvgWidth(measured_svg), schedule::SvgWidth(memory_svg)});
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.2f\" height=\"%.2f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n",
      width, header + h1 + h2 + h3);
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StrAppendFormat(&out, "<text x=\"8\" y=\"%.2f\">%s</text>\n", 18 + 16.0 * i,
                          schedule::XmlEscape(lines[i]));
  }
  out += schedule::NestSvg(predicted_svg, 0, header);
  out += schedule::NestSvg(measured_svg, 0, header + h1);
  out += schedule::NestSvg(memory_svg, 0, header + h1 + h2);
  out += "</svg>\n";
  return out;
}

}  // namespace pipetrain::client
