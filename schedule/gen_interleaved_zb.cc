#include "schedule/gen_interleaved_zb.h"

#include <algorithm>
#include <cmath>
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
#include "schedule/tolerance.h"

namespace pipetrain::schedule {
namespace {

constexpr double kUnknown = -1.0;

double MaxOf(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// Larger schedules skip the polish, as the V generators do: a trial's fixed cost grows with the
// schedule (p = 64, m = 1024 took ~30 s), while what it recovers (warm-up and cool-down idle
// time) shrinks relative to the step.
constexpr size_t kMaxPolishedActions = 8192;

size_t ActionCount(const Schedule& s) {
  size_t n = 0;
  for (const auto& list : s.worker_actions) n += list.size();
  return n;
}

// A compute-only order's peak without timing it: each action's memory event (an F's at its
// start, a B's or W's at its end) falls within the action, and a worker's actions do not
// overlap, so the events come in list order and the running sum in list order is the simulated
// curve (with Simulate's rounding to 0). Exact unless an F and the B or W after it both take no
// time (then Simulate puts the free first); the caller simulates such costs.
double OrderPeak(const Schedule& s, const CostModel& costs) {
  double most = 0.0;
  for (const auto& list : s.worker_actions) {
    double held = 0.0;
    for (const Action& a : list) {
      const StageCost& c = costs.stages[a.stage];
      double delta = 0.0;
      switch (a.kind) {
        case ActionKind::kF: delta = c.activation; break;
        case ActionKind::kB: delta = -c.freed_by_b; break;
        case ActionKind::kW: delta = -(c.activation - c.freed_by_b); break;
        case ActionKind::kBW: delta = -c.activation; break;
        default: break;
      }
      if (delta == 0.0) continue;  // Simulate records no event
      held += delta;
      if (std::abs(held) < 1e-12) held = 0.0;
      most = std::max(most, held);
    }
  }
  return most;
}

bool SomeCostIsZero(const CostModel& costs) {
  for (const StageCost& c : costs.stages) {
    if (c.f <= 0 || c.b <= 0 || c.w <= 0) return true;
  }
  return false;
}

// PlaceWs's output with the times it gave it: every action starts when its worker is free and
// its input has arrived (transfers between workers cost comm), as Simulate times a
// compute-only order, so a plan that is not polished needs no simulation.
struct Placed {
  Schedule schedule;
  double span = 0.0;  // the longest worker span (first start to last end)
  double peak = 0.0;  // the most any worker held
};

// Step 2 of the header: W's placed into a fixed F/B order. nullopt when an F cannot fit the
// cap with no W left to free memory.
std::optional<Placed> PlaceWs(const Schedule& fused, const CostModel& costs, double cap) {
  const int p = fused.num_workers, n_stages = fused.num_stages, m = fused.num_microbatches;
  Schedule out = fused;
  out.name = "interleaved-zb";
  for (auto& list : out.worker_actions) list.clear();
  auto key = [n_stages](int stage, int mb) { return static_cast<size_t>(mb) * n_stages + stage; };
  std::vector<double> f_end(static_cast<size_t>(n_stages) * m, kUnknown), b_end(f_end);
  std::vector<size_t> pos(p, 0);
  std::vector<double> free(p, 0.0), held(p, 0.0), first(p, -1.0);
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
  // Workers run until an input is missing; placing a producer wakes its consumer's worker, so
  // every action is visited O(1) times.
  std::vector<int> stack;
  std::vector<char> queued(p, 1);
  for (int w = p - 1; w >= 0; --w) stack.push_back(w);
  auto wake = [&](int w) {
    if (!queued[w]) {
      queued[w] = 1;
      stack.push_back(w);
    }
  };
  while (!stack.empty()) {
    const int w = stack.back();
    stack.pop_back();
    queued[w] = 0;
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
      if (first[w] < 0) first[w] = start;
      if (forward) {
        free[w] = start + c.f;
        f_end[key(a.stage, a.microbatch)] = free[w];
        held[w] += c.activation;
        out.worker_actions[w].push_back({ActionKind::kF, a.stage, a.microbatch});
        if (a.stage + 1 < n_stages) wake(fused.WorkerOf(a.stage + 1));
      } else {
        free[w] = start + c.b;
        b_end[key(a.stage, a.microbatch)] = free[w];
        held[w] -= c.freed_by_b;
        pending[w].push_back({a.stage, a.microbatch});
        out.worker_actions[w].push_back({ActionKind::kB, a.stage, a.microbatch});
        if (a.stage > 0) wake(fused.WorkerOf(a.stage - 1));
      }
      ++pos[w];
    }
  }
  for (int w = 0; w < p; ++w) {
    if (pos[w] < fused.worker_actions[w].size()) return std::nullopt;  // the order deadlocks
  }
  Placed placed;
  for (int w = 0; w < p; ++w) {
    while (!pending[w].empty()) run_w(w);
    if (first[w] >= 0) placed.span = std::max(placed.span, free[w] - first[w]);
  }
  placed.peak = OrderPeak(out, costs);
  placed.schedule = std::move(out);
  return placed;
}

struct Plan {
  Schedule schedule;
  double span = 0, peak = 0;
};

// Steps 1-3 for one group size, with Megatron's warm-up slope 2 and the shallower slope 1;
// nullopt when neither fits the cap. `searched`: g comes from the search under memory_limit
// (valid by construction); then g < p tries slope 1 only, since the slope-2 order with g < p
// needs many dry runs to become valid (p = 64, m = 1024, g = 32: 5 s).
absl::StatusOr<std::optional<Plan>> PlanForGroup(const PipelineSpec& spec, int g, double limit,
                                                 bool searched) {
  const int p = spec.num_workers, m = spec.num_microbatches, v = spec.chunks_per_worker;
  const CostModel costs = CostModelFor(spec, v);
  std::optional<Schedule> megatron;
  if (!searched || g >= p) {
    PipelineSpec grouped = spec;
    grouped.group_size = g;
    PT_ASSIGN_OR_RETURN(megatron, MakeGroupedInterleaved(grouped));
  }
  double cap = limit;
  const bool exact_peaks = !SomeCostIsZero(costs);  // see OrderPeak
  if (cap <= 0 && exact_peaks) {
    cap = OrderPeak(*megatron, costs);
  } else if (cap <= 0) {
    PT_ASSIGN_OR_RETURN(SimResult base, Simulate(*megatron, costs));
    cap = MaxOf(base.peak_memory);
  }
  std::optional<Plan> best;
  for (int slope : {2, 1}) {
    if (slope == 2 && !megatron) continue;
    const Schedule fused = slope == 2 ? *megatron : GroupedInterleavedOrder(p, m, v, g, slope);
    std::optional<Placed> placed = PlaceWs(fused, costs, cap);
    if (!placed) continue;
    Plan plan;
    if (ActionCount(placed->schedule) <= kMaxPolishedActions || !exact_peaks) {
      PolishOptions options;
      options.memory_cap = cap + kEps;
      options.edge = 8 * p;
      options.work_budget = 4'000'000;
      PolishResult polished;
      if (ActionCount(placed->schedule) <= kMaxPolishedActions) {
        polished = PolishOrder(placed->schedule, costs, options);
      } else {
        polished.schedule = std::move(placed->schedule);
      }
      absl::StatusOr<SimResult> sim = Simulate(polished.schedule, costs);
      if (!sim.ok()) continue;  // a slope-1 order the dry run could not repair
      plan.schedule = std::move(polished.schedule);
      plan.span = MaxOf(sim->span);
      plan.peak = MaxOf(sim->peak_memory);
    } else {
      // Large and not polished: PlaceWs's own times and peak are the simulated ones (a
      // simulation each cost ~15 ms at p = 64, m = 1024).
      plan.schedule = std::move(placed->schedule);
      plan.span = placed->span;
      plan.peak = placed->peak;
    }
    if (plan.peak > cap + 1e-6) continue;
    if (best && plan.span >= best->span - kEps) continue;
    plan.schedule.name = "interleaved-zb";
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
  // The largest group size that fits wins: a smaller one only shortens the warm-up, which saves
  // memory and costs time.
  const bool searched = groups.size() > 1;
  // Worker 0 runs at least (v-1)g + p forwards before its first backward (the shallow warm-up
  // plus the first steady F), so a memory_limit below that peak needs no plan to be refused.
  const CostModel costs = CostModelFor(spec, spec.chunks_per_worker);
  double min_activation = std::numeric_limits<double>::infinity();
  for (int c = 0; c < spec.chunks_per_worker && c * p < static_cast<int>(costs.stages.size()); ++c) {
    min_activation = std::min(min_activation, costs.stages[c * p].activation);
  }
  std::optional<Plan> best;
  for (int g : groups) {
    const int forwards = std::min((spec.chunks_per_worker - 1) * g + p, m * spec.chunks_per_worker);
    const double floor_units = forwards * min_activation;
    if (spec.memory_limit > 0 && floor_units > spec.memory_limit + kEps) continue;
    PT_ASSIGN_OR_RETURN(best, PlanForGroup(spec, g, spec.memory_limit, searched));
    if (best) break;
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
