#include "coordinator/schedule/v_generators.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::schedule {
namespace {

std::vector<VVariant> Expand(const std::vector<std::pair<std::string, VBlockShape>>& shapes,
                             VPriority priority) {
  std::vector<VVariant> out;
  // Policies: 0 greedy, 1 conservative backfill, 2 the repeated block squeezed (no reorder).
  const int policies = priority == VPriority::kBlock ? 3 : 1;
  for (const auto& [label, shape] : shapes) {
    for (int policy = 0; policy < policies; ++policy) {
      VVariant v;
      v.label = absl::StrCat(label, policy == 0   ? "/greedy"
                                    : policy == 1 ? "/conservative"
                                                  : "/squeezed");
      v.shape = shape;
      v.options.priority = priority;
      v.options.conservative = policy == 1;
      v.options.strict_order = policy == 2;
      out.push_back(std::move(v));
    }
  }
  return out;
}

VBlockShape Shape(double f0, double f1, double b1, double b0, double stretch = 0.0) {
  return VBlockShape{f0, f1, b1, b0, 0.0, stretch};
}

// Smallest cap the V schedules accept: one microbatch on the fullest worker.
double OneMicrobatch(const CostModel& costs, int p) {
  double most = 0.0;
  for (int w = 0; w < p; ++w) {
    most = std::max(most, costs.stages[w].activation + costs.stages[2 * p - 1 - w].activation);
  }
  return most;
}

absl::StatusOr<Schedule> MakeNamed(const PipelineSpec& spec, const std::string& name, double law,
                                   const std::vector<VVariant>& variants) {
  PT_RETURN_IF_ERROR(CheckVSpec(spec));
  const CostModel costs = CostModelFor(spec, 2);
  double cap = law;
  if (spec.memory_limit > 0) cap = std::min(cap, spec.memory_limit);
  cap = std::max(cap, OneMicrobatch(costs, spec.num_workers));
  PT_ASSIGN_OR_RETURN(
      VPlan plan, PlanBestV(spec.num_workers, spec.num_microbatches, costs, cap, variants, name));
  return std::move(plan.schedule);
}

}  // namespace

int VMinPeakLaw(int p) { return (p + 4) / 3; }
int VHalfPeakLaw(int p) { return (p + 2) / 2; }
int VZbPeakLaw(int p) { return p; }

std::vector<VVariant> ZbVVariants() {
  return Expand({{"zbv", Shape(0, 0, 0, 0)}}, VPriority::kBackwardFirst);
}
std::vector<VVariant> VMinVariants() {
  return Expand({{"tight", Shape(0, 0, 0, 0)},
                 {"half", Shape(1, 0, 1, 0)},
                 {"tight+10%", Shape(0, 0, 0, 0, 0.1)},
                 {"tight+25%", Shape(0, 0, 0, 0, 0.25)}},
                VPriority::kBlock);
}
std::vector<VVariant> VHalfVariants() {
  return Expand({{"half", Shape(1, 0, 1, 0)},
                 {"tight", Shape(0, 0, 0, 0)},
                 {"wide", Shape(2, 0, 2, 0)},
                 {"tight+10%", Shape(0, 0, 0, 0, 0.1)},
                 {"tight+25%", Shape(0, 0, 0, 0, 0.25)},
                 {"tight+50%", Shape(0, 0, 0, 0, 0.5)}},
                VPriority::kBlock);
}
std::vector<VVariant> VZbVariants() {
  return Expand(
      {{"wide", Shape(2, 0, 2, 0)}, {"half", Shape(1, 0, 1, 0)}, {"tight", Shape(0, 0, 0, 0)}},
      VPriority::kBlock);
}
std::vector<VVariant> AllVVariants() { return VZbVariants(); }

absl::Status CheckVSpec(const PipelineSpec& spec) {
  if (spec.num_workers < 2) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers = ", spec.num_workers,
                                                   ": V-shape schedules need num_workers >= 2"));
  }
  if (spec.num_microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches = ", spec.num_microbatches, ": must be >= 1"));
  }
  if (spec.chunks_per_worker != 0 && spec.chunks_per_worker != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunks_per_worker = ", spec.chunks_per_worker,
                     ": V-shape schedules use exactly 2 (or 0 for the default)"));
  }
  if (!spec.stage_costs.stages.empty() &&
      static_cast<int>(spec.stage_costs.stages.size()) != 2 * spec.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage_costs has ", spec.stage_costs.stages.size(),
                     " stages: V-shape needs 2 * num_workers = ", 2 * spec.num_workers));
  }
  for (double x : {spec.f, spec.b, spec.w, spec.comm}) {
    if (!(x >= 0) || !std::isfinite(x)) {
      return absl::InvalidArgumentError("f, b, w and comm must be finite and >= 0");
    }
  }
  if (spec.memory_limit < 0) {
    return absl::InvalidArgumentError("memory_limit must be >= 0 (0 = unlimited)");
  }
  if (spec.memory_limit > 0) {
    const CostModel costs = CostModelFor(spec, 2);
    const double one = OneMicrobatch(costs, spec.num_workers);
    if (spec.memory_limit + 1e-9 < one) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "memory_limit = ", spec.memory_limit, " units is below one microbatch (", one,
          " units) on a worker: no V-shape schedule fits; use a smaller microbatch, more "
          "workers, or activation offload"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<VPlan> PlanBestV(int num_workers, int num_microbatches, const CostModel& costs,
                                double cap, const std::vector<VVariant>& variants,
                                const std::string& name) {
  std::optional<VPlan> best;
  absl::Status last_error = absl::InvalidArgumentError("no V variants to try");
  for (const VVariant& variant : variants) {
    const BuildingBlock block = MakeVBlock(num_workers, costs, variant.shape);
    VListOptions options = variant.options;
    options.memory_cap = cap;
    absl::StatusOr<VListResult> r =
        ListScheduleV(num_workers, num_microbatches, costs, block, options, name);
    if (!r.ok()) {
      last_error = r.status();
      continue;
    }
    if (!best.has_value() || r->makespan < best->makespan - 1e-9) {
      best = VPlan{std::move(r->schedule), r->makespan, std::move(r->peak), variant.label};
    }
  }
  if (!best.has_value()) return last_error;
  return std::move(*best);
}

absl::StatusOr<Schedule> MakeVMin(const PipelineSpec& spec) {
  return MakeNamed(spec, "v-min", VMinPeakLaw(spec.num_workers), VMinVariants());
}
absl::StatusOr<Schedule> MakeVHalf(const PipelineSpec& spec) {
  return MakeNamed(spec, "v-half", VHalfPeakLaw(spec.num_workers), VHalfVariants());
}
absl::StatusOr<Schedule> MakeVZb(const PipelineSpec& spec) {
  return MakeNamed(spec, "v-zb", VZbPeakLaw(spec.num_workers), VZbVariants());
}
absl::StatusOr<Schedule> MakeZbV(const PipelineSpec& spec) {
  return MakeNamed(spec, "zb-v", VZbPeakLaw(spec.num_workers), ZbVVariants());
}
absl::StatusOr<Schedule> MakeVAdaptive(const PipelineSpec& spec) {
  if (spec.memory_limit <= 0) {
    return absl::InvalidArgumentError(
        "memory_limit must be > 0 for v-adaptive (peak activation units per worker)");
  }
  // Above 2p units nothing changes: every V schedule is done by then.
  return MakeNamed(spec, "v-adaptive", 2.0 * spec.num_workers, AllVVariants());
}

}  // namespace pipetrain::schedule
