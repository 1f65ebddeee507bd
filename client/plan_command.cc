#include "client/plan_command.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/job_file.h"
#include "client/model_view.h"
#include "common/status_macros.h"
#include "model/job_spec_validation.h"
#include "planner/data_parallel_search.h"
#include "planner/plan_file.h"
#include "planner/planner.h"
#include "schedule/auto_planner.h"
#include "schedule/generator.h"
#include "schedule/offload_pass.h"
#include "schedule/offload_ratio.h"
#include "schedule/plan_json.h"
#include "schedule/render_ascii.h"
#include "schedule/render_svg.h"
#include "schedule/render_trace.h"
#include "schedule/schedule_io.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::client {
namespace {

using schedule::PipelineSpec;

absl::Status Bad(absl::string_view msg) { return absl::InvalidArgumentError(msg); }

// The job spec's bounds (model/job_spec_validation.h) apply to the flags too, so that a typo is
// refused at once instead of planning for long in gigabytes (-m 100000000 took 23 s and 9.8 GB).
absl::Status CheckWorkers(int workers) {
  if (workers >= 1 && workers <= model::kMaxWorkers) return absl::OkStatus();
  return Bad(absl::StrCat("--workers must be in 1..", model::kMaxWorkers, " (got ", workers, ")"));
}

// Errors from the library may carry a multi-line grid; the CLI prints one line.
absl::Status FirstLine(const absl::Status& s) {
  std::string msg(s.message());
  const size_t nl = msg.find('\n');
  if (nl != std::string::npos) msg.resize(nl);
  return absl::Status(s.code(), msg);
}

absl::Status ParseCosts(const std::string& text, PipelineSpec* spec) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  double v[3];
  bool ok = parts.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i) {
    ok = absl::SimpleAtod(parts[i], &v[i]) && std::isfinite(v[i]) && v[i] >= 0;
  }
  if (!ok || v[0] + v[1] + v[2] <= 0) {
    return Bad(
        absl::StrCat("--costs must be three non-negative numbers f,b,w (not all 0), e.g. "
                     "1,1,1 or 1,2,1; got \"",
                     text, "\""));
  }
  spec->f = v[0];
  spec->b = v[1];
  spec->w = v[2];
  return absl::OkStatus();
}

// The document of `schedule` in `format` (ascii, svg, trace, csv, json).
std::string Render(const std::string& format, const schedule::Schedule& sched,
                   const schedule::SimResult& sim, const schedule::CostModel& costs) {
  if (format == "ascii") return schedule::RenderAscii(sched, sim);
  if (format == "svg") return schedule::RenderSvg(sched, sim);
  if (format == "trace") return schedule::RenderChromeTrace(sched, sim);
  if (format == "csv") return schedule::ScheduleToCsv(sched);
  return schedule::PlanToJson(sched, sim, costs);
}

const std::vector<std::string>& Formats() {
  static const auto* const kFormats =
      new std::vector<std::string>{"ascii", "svg", "trace", "csv", "json", "plan-file"};
  return *kFormats;
}

// --job: the job planned as the coordinator plans it (analytic costs), rendered or as a plan
// file.
absl::StatusOr<PlanOutput> RunJobPlan(const PlanOptions& o) {
  if (o.microbatches != -1) {
    return Bad("--microbatches comes from the --job file (training.global_batch / "
               "microbatch_size); drop it");
  }
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(o.job_path);
  if (!spec.ok()) return absl::Status(spec.status().code(), spec.status().message());
  PlanOutput out;
  planner::PlannerOptions options;
  options.shared_host_cores = o.host_cores;
  if (!o.device.empty()) {
    // A GPU job planned offline: the analytic costs at the preset's sustained GEMM rate and its
    // host link (otherwise the CPU default rate, which makes a GPU's step look 10^4 times
    // longer and its transfers free). The coordinator measures both instead.
    absl::StatusOr<schedule::DeviceLink> preset = schedule::FindDevicePreset(o.device);
    if (!preset.ok()) return Bad(absl::StrCat("--device: ", preset.status().message()));
    const schedule::DeviceLink link =
        schedule::WithMeasuredLink(*preset, o.link_bytes_per_s, o.link_bytes_per_s);
    options.device_flops_per_s = link.flops_per_s;
    options.host_d2h_bytes_per_s = link.d2h_bytes_per_s;
    options.host_h2d_bytes_per_s = link.h2d_bytes_per_s;
  }
  options.search_microbatch_size = o.search_microbatch_size;
  absl::StatusOr<planner::PlannedJob> planned;
  if (o.workers != -1) {
    // --workers N with a job: the split of N into data-parallel replicas x pipeline ranks with
    // the shortest predicted step (planner/data_parallel_search.h).
    PT_RETURN_IF_ERROR(CheckWorkers(o.workers));
    absl::StatusOr<planner::DataParallelSearch> search =
        planner::SearchDataParallel(*spec, o.workers, options);
    if (!search.ok()) {
      return absl::Status(search.status().code(),
                          absl::StrCat("--job ", o.job_path, " on --workers ", o.workers, ": ",
                                       FirstLine(search.status()).message()));
    }
    if (o.explain) out.explanation = planner::FormatDataParallelSearch(*search);
    *spec = search->spec;
    planned = std::move(search->planned);
  } else {
    planned = planner::PlanJob(*spec, options);
  }
  if (!planned.ok()) {
    return absl::Status(planned.status().code(),
                        absl::StrCat("--job ", o.job_path, ": ",
                                     FirstLine(planned.status()).message()));
  }
  out.format = o.format.empty() ? "plan-file" : o.format;
  out.summary = absl::StrCat(FormatModelLine(*spec), "\n",
                             schedule::RenderSummary(planned->schedule, planned->sim),
                             planned->plan.explanation(), "\n");
  if (planned->plan.has_evaluation()) {
    absl::StrAppend(&out.summary, planned->plan.evaluation().explanation(), "\n");
  }
  if (out.format != "plan-file") {
    out.document = Render(out.format, planned->schedule, planned->sim, planned->costs);
    return out;
  }
  planner::PlanFileOptions file;
  file.job_id = o.job_id;
  file.base_port = o.base_port;
  if (!o.addresses.empty()) file.addresses = absl::StrSplit(o.addresses, ',');
  absl::StatusOr<std::string> json = planner::PlanFileJson(*spec, planned->plan, file);
  if (!json.ok()) {  // the option names as the CLI spells them
    return Bad(absl::StrCat("--", absl::StrReplaceAll(json.status().message(),
                                                      {{"base_port", "base-port"}})));
  }
  out.document = *std::move(json);
  return out;
}

// --from-csv: a schedule written elsewhere (PyTorch pipelining's CSV), validated and simulated
// with the cost flags.
absl::StatusOr<PlanOutput> RunCsvPlan(const PlanOptions& o) {
  if (o.workers != -1 || o.microbatches != -1 || o.chunks != 0) {
    return Bad("--workers, --microbatches and --chunks come from the --from-csv file; drop them");
  }
  std::ifstream in(o.csv_path);
  if (!in) return Bad(absl::StrCat("--from-csv: cannot read ", o.csv_path));
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<schedule::Schedule> sched = schedule::ScheduleFromCsv(
      text.str(), std::filesystem::path(o.csv_path).stem().string());
  if (!sched.ok()) {
    return Bad(absl::StrCat("--from-csv ", o.csv_path, ": ", FirstLine(sched.status()).message()));
  }
  if (absl::Status valid = schedule::ValidateSchedule(*sched); !valid.ok()) {
    return Bad(absl::StrCat("--from-csv ", o.csv_path, ": not a valid schedule: ",
                            FirstLine(valid).message()));
  }
  PipelineSpec spec;
  spec.num_workers = sched->num_workers;
  spec.num_microbatches = sched->num_microbatches;
  spec.comm = o.comm;
  PT_RETURN_IF_ERROR(ParseCosts(o.costs, &spec));
  const schedule::CostModel costs = schedule::CostModelFor(spec, sched->ChunksPerWorker());
  absl::StatusOr<schedule::SimResult> sim = schedule::Simulate(*sched, costs);
  if (!sim.ok()) return FirstLine(sim.status());
  PlanOutput out;
  out.summary = schedule::RenderSummary(*sched, *sim);
  out.format = o.format.empty() ? "ascii" : o.format;
  out.document = Render(out.format, *sched, *sim, costs);
  return out;
}

}  // namespace

absl::StatusOr<PlanOutput> RunPlan(const PlanOptions& o) {
  if (!o.format.empty() &&
      std::find(Formats().begin(), Formats().end(), o.format) == Formats().end()) {
    return Bad(absl::StrCat("--format must be one of ", absl::StrJoin(Formats(), ", "),
                            " (got \"", o.format, "\")"));
  }
  if (!o.job_path.empty() && !o.csv_path.empty()) {
    return Bad("--job and --from-csv exclude each other");
  }
  if (o.host_cores < 0) {
    return Bad(absl::StrCat("--host-cores must be >= 0 (got ", o.host_cores, ")"));
  }
  if (o.host_cores > 0 && o.job_path.empty()) {
    return Bad("--host-cores needs --job FILE (the job's workers share the host's cores)");
  }
  if (!o.job_path.empty()) return RunJobPlan(o);
  if (o.format == "plan-file") {
    return Bad("--format plan-file needs --job FILE (a plan file carries the job's model and "
               "data as well as the schedule)");
  }
  if (!o.csv_path.empty()) return RunCsvPlan(o);
  for (auto [flag, value] : {std::pair<const char*, int>{"--workers", o.workers},
                             std::pair<const char*, int>{"--microbatches", o.microbatches}}) {
    if (value == -1) return Bad(absl::StrCat(flag, " is required (or plan a job file: --job)"));
  }
  PT_RETURN_IF_ERROR(CheckWorkers(o.workers));
  if (o.microbatches < 1 || o.microbatches > model::kMaxMicrobatches) {
    return Bad(absl::StrCat("--microbatches must be in 1..", model::kMaxMicrobatches, " (got ",
                            o.microbatches, ")"));
  }
  if (o.chunks < 0 || o.chunks > model::kMaxChunksPerWorker) {
    return Bad(absl::StrCat("--chunks must be in 1..", model::kMaxChunksPerWorker,
                            ", or 0 for the schedule's default (got ", o.chunks, ")"));
  }
  if (!(o.comm >= 0) || !std::isfinite(o.comm)) {
    return Bad(absl::StrCat("--comm must be a finite number >= 0 (got ", o.comm, ")"));
  }
  if (!(o.memory_budget >= 0) || !std::isfinite(o.memory_budget)) {
    return Bad(absl::StrCat("--memory-budget must be >= 0 units, 0 = schedule default (got ",
                            o.memory_budget, ")"));
  }
  auto mode = schedule::ParseOffloadMode(o.offload);
  if (!mode.ok()) {
    return Bad(absl::StrCat("--offload must be one of none, half, full, selective (got \"",
                            o.offload, "\")"));
  }
  if (!(o.offload_ratio >= 0) || !std::isfinite(o.offload_ratio)) {
    return Bad(absl::StrCat("--offload-ratio must be a finite number >= 0 (got ",
                            o.offload_ratio, ")"));
  }
  double k = o.offload_ratio;
  std::string k_source = "--offload-ratio";
  if (!o.device.empty()) {
    auto preset = schedule::FindDevicePreset(o.device);
    if (!preset.ok()) return Bad(absl::StrCat("--device: ", preset.status().message()));
    auto ratio = schedule::OffloadRatio(
        o.hidden, o.seq_len,
        schedule::WithMeasuredLink(*preset, o.link_bytes_per_s, o.link_bytes_per_s));
    if (!ratio.ok()) {
      return Bad(absl::StrCat("--device needs --hidden and --seq-len > 0 (got ", o.hidden, " and ",
                              o.seq_len, ")"));
    }
    k = *ratio;
    k_source = absl::StrCat("--device ", preset->name, " h=", o.hidden, " s=", o.seq_len,
                            o.link_bytes_per_s > 0 ? " measured link" : " preset link");
  }
  if (*mode != schedule::OffloadMode::kNone && !(k > 0)) {
    return Bad("--offload needs a host link: --offload-ratio K or --device with --hidden/--seq-len");
  }
  if (*mode != schedule::OffloadMode::kNone && o.schedule == "auto") {
    return Bad("--offload is for a named schedule; with --schedule auto give only the link "
               "(--offload-ratio or --device) and auto decides the offload");
  }
  if (*mode == schedule::OffloadMode::kSelective && !(o.memory_budget > 0)) {
    return Bad("--offload selective needs --memory-budget > 0 (the peak to reach)");
  }
  PipelineSpec spec;
  spec.offload_ratio = k;
  spec.num_workers = o.workers;
  spec.num_microbatches = o.microbatches;
  spec.chunks_per_worker = o.chunks;
  spec.comm = o.comm;
  spec.memory_limit = o.memory_budget;
  PT_RETURN_IF_ERROR(ParseCosts(o.costs, &spec));
  PlanOutput out;
  if (o.explain && o.schedule == "auto") {
    const auto rows = schedule::ExplainAuto(spec);
    out.explanation = absl::StrCat(schedule::FormatCandidates(rows),
                                   schedule::ExplainChoice(spec, rows), "\n");
    if (k > 0) absl::StrAppend(&out.explanation, "offload ratio k = ", k, " (", k_source, ")\n");
  }
  auto sched = schedule::Generate(o.schedule, spec);
  if (!sched.ok()) {
    if (!out.explanation.empty()) {
      return absl::Status(sched.status().code(),
                          absl::StrCat(FirstLine(sched.status()).message(), "\n",
                                       out.explanation));
    }
    return FirstLine(sched.status());
  }
  const schedule::CostModel costs = schedule::CostModelFor(spec, sched->ChunksPerWorker());
  if (*mode != schedule::OffloadMode::kNone) {
    schedule::OffloadOptions options;
    options.mode = *mode;
    options.memory_limit = o.memory_budget;
    auto plan = schedule::AddOffload(*sched, costs, options);
    if (!plan.ok()) return FirstLine(plan.status());
    if (o.explain) {
      out.explanation = absl::StrCat("offload ", o.offload, ": ", plan->offloaded, " of ",
                                     plan->stashes, " stashes (", plan->eligible,
                                     " eligible), offload ratio k = ", k, " (", k_source, ")\n");
    }
    *sched = std::move(plan->schedule);
  }
  auto sim = schedule::Simulate(*sched, costs);
  if (!sim.ok()) return FirstLine(sim.status());
  out.summary = schedule::RenderSummary(*sched, *sim);
  out.format = o.format.empty() ? "ascii" : o.format;
  out.document = Render(out.format, *sched, *sim, costs);
  return out;
}

}  // namespace pipetrain::client
