#include "client/plan_command.h"

#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "coordinator/schedule/generator.h"
#include "coordinator/schedule/plan_json.h"
#include "coordinator/schedule/render_ascii.h"
#include "coordinator/schedule/render_svg.h"
#include "coordinator/schedule/render_trace.h"
#include "coordinator/schedule/schedule_io.h"
#include "coordinator/schedule/simulator.h"

namespace pipetrain::client {
namespace {

using schedule::PipelineSpec;

absl::Status Bad(absl::string_view msg) { return absl::InvalidArgumentError(msg); }

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

}  // namespace

absl::StatusOr<PlanOutput> RunPlan(const PlanOptions& o) {
  if (o.workers < 1) return Bad(absl::StrCat("--workers must be >= 1 (got ", o.workers, ")"));
  if (o.microbatches < 1) {
    return Bad(absl::StrCat("--microbatches must be >= 1 (got ", o.microbatches, ")"));
  }
  if (o.chunks < 0) {
    return Bad(absl::StrCat("--chunks must be >= 1, or 0 for the schedule's default (got ",
                            o.chunks, ")"));
  }
  if (!(o.comm >= 0) || !std::isfinite(o.comm)) {
    return Bad(absl::StrCat("--comm must be a finite number >= 0 (got ", o.comm, ")"));
  }
  if (!(o.memory_budget >= 0) || !std::isfinite(o.memory_budget)) {
    return Bad(absl::StrCat("--memory-budget must be >= 0 units, 0 = schedule default (got ",
                            o.memory_budget, ")"));
  }
  const std::vector<std::string> formats = {"ascii", "svg", "trace", "csv", "json"};
  if (std::find(formats.begin(), formats.end(), o.format) == formats.end()) {
    return Bad(absl::StrCat("--format must be one of ", absl::StrJoin(formats, ", "), " (got \"",
                            o.format, "\")"));
  }
  PipelineSpec spec;
  spec.num_workers = o.workers;
  spec.num_microbatches = o.microbatches;
  spec.chunks_per_worker = o.chunks;
  spec.comm = o.comm;
  spec.memory_limit = o.memory_budget;
  PT_RETURN_IF_ERROR(ParseCosts(o.costs, &spec));
  auto sched = schedule::Generate(o.schedule, spec);
  if (!sched.ok()) return FirstLine(sched.status());
  const schedule::CostModel costs = schedule::CostModelFor(spec, sched->ChunksPerWorker());
  auto sim = schedule::Simulate(*sched, costs);
  if (!sim.ok()) return FirstLine(sim.status());
  PlanOutput out;
  out.summary = schedule::RenderSummary(*sched, *sim);
  if (o.format == "ascii") {
    out.document = schedule::RenderAscii(*sched, *sim);
  } else if (o.format == "svg") {
    out.document = schedule::RenderSvg(*sched, *sim);
  } else if (o.format == "trace") {
    out.document = schedule::RenderChromeTrace(*sched, *sim);
  } else if (o.format == "csv") {
    out.document = schedule::ScheduleToCsv(*sched);
  } else {
    out.document = schedule::PlanToJson(*sched, *sim, costs);
  }
  return out;
}

}  // namespace pipetrain::client
