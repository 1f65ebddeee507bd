#include "schedule/gen_interleaved_zb.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/generators_classic.h"
#include "schedule/order_polish.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {
namespace {

constexpr double kUnknown = -1.0;
constexpr double kEps = 1e-9;

double MaxOf(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// Step 2 of the header: W's placed into a fixed F/B order. nullopt when an F cannot fit the
// cap with no W left to free memory.
std::optional<Schedule> PlaceWs(const Schedule& fused, const CostModel& costs, double cap) {
  const int p = fused.num_workers, n_stages = fused.num_stages, m = fused.num_microbatches;
  Schedule out = fused;
  out.name = "interleaved-zb";
  for (auto& list : out.worker_actions) list.clear();
  auto key = [n_stages](int stage, int mb) { return static_cast<size_t>(mb) * n_stages + stage; };
  std::vector<double> f_end(static_cast<size_t>(n_stages) * m, kUnknown), b_end(f_end);
  std::vector<size_t> pos(p, 0);
  std::vector<double> free(p, 0.0), held(p, 0.0);
  std::vector<std::deque<std::pair<int, int>>> pending(p);
  auto cross = [&](int a, int b) { return fused.WorkerOf(a) != fused.WorkerOf(b); };
  auto run_w = [&](int w) {
    const auto [stage, mb] = pending[w].front();
    pending[w].pop_front();
    const StageCost& c = costs.stages[stage];
    free[w] += c.w;
    held[w] -= c.activation - c.freed_by_b;
    out.worker_actions[w].push_back({ActionKind::kW, stage, mb});
  };
  bool progress = true;
  size_t done = 0, total = 0;
  for (const auto& list : fused.worker_actions) total += list.size();
  while (done < total) {
    if (!progress) return std::nullopt;  // cannot happen for a valid fused order
    progress = false;
    for (int w = 0; w < p; ++w) {
      const auto& list = fused.worker_actions[w];
      while (pos[w] < list.size()) {
        const Action a = list[pos[w]];
        const StageCost& c = costs.stages[a.stage];
        const bool forward = a.kind == ActionKind::kF;
        double ready = 0.0;
        if (forward) {
          if (a.stage > 0) {
            const double t = f_end[key(a.stage - 1, a.microbatch)];
            if (t < 0) break;
            ready = t + (cross(a.stage - 1, a.stage) ? costs.comm : 0.0);
          }
        } else {
          const double own = f_end[key(a.stage, a.microbatch)];
          if (own < 0) break;
          ready = own;
          if (a.stage + 1 < n_stages) {
            const double t = b_end[key(a.stage + 1, a.microbatch)];
            if (t < 0) break;
            ready = std::max(ready, t + (cross(a.stage + 1, a.stage) ? costs.comm : 0.0));
          }
        }
        if (forward) {
          while (held[w] + c.activation > cap + kEps) {
            if (pending[w].empty()) return std::nullopt;
            run_w(w);
          }
        }
        while (!pending[w].empty() &&
               free[w] + costs.stages[pending[w].front().first].w <= ready + kEps) {
          run_w(w);
        }
        const double start = std::max(free[w], ready);
        if (forward) {
          free[w] = start + c.f;
          f_end[key(a.stage, a.microbatch)] = free[w];
          held[w] += c.activation;
          out.worker_actions[w].push_back({ActionKind::kF, a.stage, a.microbatch});
        } else {
          free[w] = start + c.b;
          b_end[key(a.stage, a.microbatch)] = free[w];
          held[w] -= c.freed_by_b;
          pending[w].push_back({a.stage, a.microbatch});
          out.worker_actions[w].push_back({ActionKind::kB, a.stage, a.microbatch});
        }
        ++pos[w];
        ++done;
        progress = true;
      }
    }
  }
  for (int w = 0; w < p; ++w) {
    while (!pending[w].empty()) run_w(w);
  }
  return out;
}

struct Plan {
  Schedule schedule;
  double span = 0, peak = 0;
};

// Steps 1-3 for one group size, with Megatron's warm-up slope 2 and the shallower slope 1;
// nullopt when neither fits the cap.
absl::StatusOr<std::optional<Plan>> PlanForGroup(const PipelineSpec& spec, int g, double limit) {
  PipelineSpec grouped = spec;
  grouped.group_size = g;
  PT_ASSIGN_OR_RETURN(Schedule megatron, MakeGroupedInterleaved(grouped));
  const CostModel costs = CostModelFor(spec, spec.chunks_per_worker);
  double cap = limit;
  if (cap <= 0) {
    PT_ASSIGN_OR_RETURN(SimResult base, Simulate(megatron, costs));
    cap = MaxOf(base.peak_memory);
  }
  std::optional<Plan> best;
  for (int slope : {2, 1}) {
    const Schedule fused =
        slope == 2 ? megatron
                   : GroupedInterleavedOrder(spec.num_workers, spec.num_microbatches,
                                             spec.chunks_per_worker, g, slope);
    std::optional<Schedule> placed = PlaceWs(fused, costs, cap);
    if (!placed) continue;
    PolishOptions options;
    options.memory_cap = cap + kEps;
    options.edge = 8 * spec.num_workers;
    options.work_budget = 4'000'000;
    PolishResult polished = PolishOrder(*placed, costs, options);
    absl::StatusOr<SimResult> sim = Simulate(polished.schedule, costs);
    if (!sim.ok()) continue;  // a slope-1 order the dry run could not repair
    if (MaxOf(sim->peak_memory) > cap + 1e-6) continue;
    if (best && MaxOf(sim->span) >= best->span - kEps) continue;
    Plan plan;
    plan.schedule = std::move(polished.schedule);
    plan.schedule.name = "interleaved-zb";
    plan.span = MaxOf(sim->span);
    plan.peak = MaxOf(sim->peak_memory);
    best = std::move(plan);
  }
  return best;
}

}  // namespace

absl::StatusOr<Schedule> MakeInterleavedZb(const PipelineSpec& spec) {
  const int p = spec.num_workers, m = spec.num_microbatches;
  if (spec.chunks_per_worker < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks_per_worker must be >= 2 for interleaved-zb (got ", spec.chunks_per_worker, ")"));
  }
  std::vector<int> groups;
  if (spec.group_size != 0 || spec.memory_limit <= 0) {
    groups.push_back(spec.group_size == 0 ? p : spec.group_size);
  } else {
    for (int g = std::min(p, m); g >= (p + 1) / 2; --g) {
      if (m % g == 0) groups.push_back(g);
    }
    if (groups.empty()) groups.push_back(p);  // let the grouped order word the error
  }
  std::optional<Plan> best;
  for (int g : groups) {
    PT_ASSIGN_OR_RETURN(std::optional<Plan> plan, PlanForGroup(spec, g, spec.memory_limit));
    if (plan && (!best || plan->span < best->span - kEps)) best = std::move(plan);
  }
  if (!best) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "interleaved-zb: no group size fits memory_limit ", spec.memory_limit,
        " units per worker (tried group sizes ", groups.front(), "..", groups.back(),
        "); raise memory_limit or use a V-shape schedule (v-half, v-min)"));
  }
  return std::move(best->schedule);
}

}  // namespace pipetrain::schedule
