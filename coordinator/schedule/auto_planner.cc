#include "coordinator/schedule/auto_planner.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/schedule/simulator.h"

namespace pipetrain::schedule {
namespace {

constexpr const char* kFamily[] = {
    "v-zb",  "zb-v",  "v-half",           "v-min", "v-adaptive", "1f1b",
    "zb-h1", "zb-h2", "interleaved-1f1b", "gpipe"};

struct Tried {
  PlanCandidate row;
  std::optional<Schedule> schedule;
};

std::vector<Tried> TryAll(const PipelineSpec& spec) {
  std::vector<Tried> out;
  for (const char* name : kFamily) {
    Tried t;
    t.row.name = name;
    if (std::string(name) == "v-adaptive" && spec.memory_limit <= 0) continue;
    absl::StatusOr<Schedule> s = Generate(name, spec);
    if (!s.ok()) {
      t.row.error = std::string(s.status().message());
      out.push_back(std::move(t));
      continue;
    }
    absl::StatusOr<SimResult> sim = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
    if (!sim.ok()) {
      t.row.error = std::string(sim.status().message());
      out.push_back(std::move(t));
      continue;
    }
    t.row.generated = true;
    t.row.makespan = sim->makespan;
    t.row.bubble = sim->bubble_ratio;
    t.row.peak = *std::max_element(sim->peak_memory.begin(), sim->peak_memory.end());
    t.row.fits = spec.memory_limit <= 0 || t.row.peak <= spec.memory_limit + 1e-9;
    t.schedule = std::move(*s);
    out.push_back(std::move(t));
  }
  int best = -1;
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    if (out[i].row.fits && (best < 0 || out[i].row.makespan < out[best].row.makespan - 1e-9)) {
      best = i;
    }
  }
  if (best >= 0) out[best].row.chosen = true;
  return out;
}

}  // namespace

std::vector<PlanCandidate> ExplainAuto(const PipelineSpec& spec) {
  std::vector<PlanCandidate> rows;
  for (Tried& t : TryAll(spec)) rows.push_back(std::move(t.row));
  return rows;
}

std::string FormatCandidates(const std::vector<PlanCandidate>& candidates) {
  std::string out =
      absl::StrFormat("%-18s %12s %8s %8s %5s\n", "schedule", "makespan", "bubble", "peak", "fits");
  for (const PlanCandidate& c : candidates) {
    if (!c.generated) {
      absl::StrAppend(&out, absl::StrFormat("%-18s %s\n", c.name, "refused: " + c.error));
      continue;
    }
    absl::StrAppend(
        &out, absl::StrFormat("%-18s %12.3f %8.4f %8.2f %5s%s\n", c.name, c.makespan, c.bubble,
                              c.peak, c.fits ? "yes" : "no", c.chosen ? "  <- chosen" : ""));
  }
  return out;
}

absl::StatusOr<Schedule> MakeAuto(const PipelineSpec& spec) {
  std::vector<Tried> tried = TryAll(spec);
  double smallest = std::numeric_limits<double>::infinity();
  std::string smallest_name;
  for (Tried& t : tried) {
    if (t.row.chosen) {
      Schedule s = std::move(*t.schedule);
      s.name = absl::StrCat("auto:", t.row.name);
      return s;
    }
    if (t.row.generated && t.row.peak < smallest) {
      smallest = t.row.peak;
      smallest_name = t.row.name;
    }
  }
  if (smallest_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("auto: no schedule accepts this spec\n", FormatCandidates(ExplainAuto(spec))));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "auto: no schedule fits memory_limit = ", spec.memory_limit,
      " units per worker; the smallest achievable peak is ", smallest, " units (", smallest_name,
      "). What would help: more workers (peak per worker falls with p for V-Min/V-Half), a "
      "smaller microbatch (activation units scale with microbatch size), or activation "
      "offload to host memory.\n",
      FormatCandidates(ExplainAuto(spec))));
}

}  // namespace pipetrain::schedule
