#include "schedule/v_generators.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/cyclic_order.h"
#include "schedule/order_polish.h"
#include "schedule/v_block_search.h"
#include "schedule/v_finalists.h"
#include "schedule/v_greedy.h"
#include "schedule/v_modulo_variants.h"
#include "schedule/v_pattern.h"
#include "schedule/v_zbv.h"

namespace pipetrain::schedule {
namespace {

// Smallest cap the V schedules accept: one microbatch on the fullest worker.
double OneMicrobatch(const CostModel& costs, int p) {
  double most = 0.0;
  for (int w = 0; w < p; ++w) {
    most = std::max(most, costs.stages[w].activation + costs.stages[2 * p - 1 - w].activation);
  }
  return most;
}

// The greedy engine's search space for a cap: priority rules x in-flight limits K (chunk-0
// microbatches a worker may hold before their chunk-0 B; 0 = limited by memory only).
// A limit K >= `no_limit_from` never binds (memory stops a worker first) and would repeat the
// K = 0 candidates.
std::vector<VVariant> GreedyVariants(int p, double cap_chunks, bool full, double no_limit_from) {
  std::vector<int> ks = {0};
  if (full) {
    for (double x : {0.75, 1.0}) {
      ks.push_back(std::max(1, static_cast<int>(std::ceil(x * cap_chunks))));
    }
    ks.push_back(p);
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    ks.erase(std::remove_if(ks.begin() + 1, ks.end(), [&](int k) { return k >= no_limit_from; }),
             ks.end());
  }
  // (b_older_first, f1_first, wait): the rules that won somewhere on the tested grid.
  struct Rule {
    bool older, f1, wait;
  };
  const Rule rules[] = {{true, true, false},
                        {true, true, true},
                        {false, true, false},
                        {false, true, true},
                        {true, false, false}};
  std::vector<VVariant> out;
  for (int k : ks) {
    for (const Rule& rule : rules) {
      if (!rule.f1 && k != 0) continue;
      VVariant v;
      v.label = absl::StrCat("greedy K=", k, rule.older ? " b-older" : " b-down",
                             rule.f1 ? " f1" : " f0", rule.wait ? " wait" : "");
      v.options.b_older_first = rule.older;
      v.options.f1_first = rule.f1;
      v.options.idle_budget = rule.wait ? 1.0 : 0.0;
      v.inflight = k;
      out.push_back(std::move(v));
      if (!full) return out;  // ZB-V: the one backward-first greedy
    }
  }
  return out;
}

// Repeated real-cost building blocks (building_block.h) as candidates: the shapes that won
// somewhere on the tested grid (p 4..16, costs 1:1:1, 1:2:1, 1:1.5:0.5, comm 0 and 0.2) in a
// search over gaps {0, .5, 1, 2}, W delay {0, 1, 3, 6}, period stretch {0, .25, .5, .75}.
// Each is kept only if its simulated peak fits the cap.
std::vector<VVariant> BlockVariants() {
  const VBlockShape shapes[] = {
      {1, 2, 0.5, 0.5, 3, 0.5},  {0, 1, 1, 1, 3, 0.5},    {1, 2, 0, 0, 1, 0.25},
      {0, 0.5, 0.5, 0, 3, 0.25}, {0, 2, 0, 2, 3, 0.5},    {0.5, 2, 0.5, 1, 3, 0.75},
      {0, 2, 0.5, 1, 6, 0.75},   {0.5, 1, 0, 0, 1, 0.25}, {2, 2, 1, 0, 0, 0.75}};
  std::vector<VVariant> out;
  for (const VBlockShape& s : shapes) {
    VVariant v;
    v.label = absl::StrCat("block gaps ", s.f0_gap, "/", s.f1_gap, "/", s.b1_gap, "/", s.b0_gap,
                           " w+", s.w_delay, " stretch ", s.period_stretch);
    v.block = s;
    out.push_back(std::move(v));
  }
  return out;
}

// Searched building blocks (v_block_search.h) on the grid that represents the costs best, at the
// period of the busiest worker's work, else one or two slots longer (comm or rounding can force
// waits that only a longer period absorbs): the first period at which a block's lifespan bound
// fits the cap ends the search. The beam narrows with p (the search is linear in p x beam; the
// grid's cells p <= 16 keep the full beam).
std::vector<VVariant> SearchedBlockVariants(int p, const CostModel& costs, double cap) {
  std::vector<VVariant> out;
  VBlockSearchOptions options;
  options.slots = ChooseVBlockSlots(p, costs);
  options.beam = std::clamp(512 / p, 8, 32);
  options.max_wait = 2;
  options.max_results = 3;
  for (int extra : {0, 1, 2}) {
    options.extra_slots = extra;
    std::vector<BuildingBlock> found = SearchVBlocks(p, costs, options);
    bool fits = false;
    for (size_t k = 0; k < found.size(); ++k) {
      const std::vector<double> bound = LifespanPeakBound(found[k], costs);
      fits |= *std::max_element(bound.begin(), bound.end()) <= cap + 1e-9;
      VVariant v;
      v.label = absl::StrCat("searched block ", options.slots, "+", extra, " slots #", k);
      v.fixed_block = std::move(found[k]);
      out.push_back(std::move(v));
    }
    if (fits) break;
  }
  return out;
}

// `zbv`: also the ZB-V wave scheduler (v_zbv.h), which wins whenever the cap allows its
// warm-up (about p units); the greedy candidates run unless it already reached the lower bound.
// Schedules up to this many actions (p x m <= ~1365) get the order polish (order_polish.h, up to
// ~60 ms); beyond it warm-up and cool-down are a small share of the step and the polish's fixed
// budget buys only a few hundred timings (unit costs, p=16 m=128: none of them helped).
constexpr int64_t kPolishMaxActions = 8192;

bool PolishedSize(const Schedule& s) {
  int64_t actions = 0;
  for (const auto& l : s.worker_actions) actions += static_cast<int64_t>(l.size());
  return actions <= kPolishMaxActions;
}

Schedule Polished(Schedule s, const CostModel& costs, double cap) {
  if (!PolishedSize(s)) return s;
  PolishOptions options;
  options.memory_cap = cap;
  options.edge = 8 * s.num_workers;
  return PolishOrder(s, costs, options).schedule;
}

// With a long chain (transfer costs) and a tight cap, no one-microbatch block may repeat as fast
// as the workers could go; two microbatches per period interleaved unevenly can
// (cyclic_order.h). The plan's steady state, read as a cyclic order of two microbatches, is
// searched for a shorter period and, when one is found, the unrolled order competes with the
// plan (each polished; the shorter longest worker span wins). Nothing runs when the steady state
// is already at the busiest worker's work.
constexpr int64_t kCyclicSearchBudget = 12'000'000;  // edge relaxations (~30 ms at p=8)

// The V-specific timing (v_pattern.h: the same ASAP times as Simulate for compute-only V
// orders, without the general engine's transfer and offload bookkeeping: at p = 64, m = 1024
// it is a third of Simulate's time, and v-min times two orders here).
double LongestSpan(const Schedule& s, const CostModel& costs) {
  const VOrderEval e = EvaluateVOrder(s, costs);
  return e.ok ? e.max_span : 1e300;
}

// `span`: s's longest worker span as its planner timed it (the same ASAP times), or < 0; an
// order too large for the polish is then not timed again.
Schedule Finished(Schedule s, const CostModel& costs, double cap, double span = -1.0) {
  constexpr int kMicrobatchesPerPeriod = 2;
  const std::optional<CyclicOrder> window = SteadyWindow(s, kMicrobatchesPerPeriod);
  std::optional<Schedule> unrolled;
  if (window) {
    CyclicSearchOptions options;
    options.memory_cap = cap;
    // Past p = 16 the budget falls as 1/p^2: each candidate costs more there, and a shorter
    // period is no likelier (on the tested grid one was found only at p <= 4; at p = 24, 32 and
    // 64 with comm 0.2 the plans are the same with 12M relaxations or with this).
    const int64_t p = s.num_workers;
    options.work_budget =
        std::min<int64_t>(kCyclicSearchBudget, kCyclicSearchBudget * 256 / (p * p));
    const CyclicSearchResult found = ShortenPeriod(*window, s, costs, options);
    if (found.period < found.start_period - 1e-9) {
      unrolled = Unroll(found.order, s, s.num_microbatches);
    }
  }
  if (span < 0 || PolishedSize(s)) span = -1.0;
  Schedule plan = Polished(std::move(s), costs, cap);
  if (!unrolled) return plan;
  Schedule other = Polished(std::move(*unrolled), costs, cap);
  return LongestSpan(other, costs) < (span >= 0 ? span : LongestSpan(plan, costs)) - 1e-9
             ? std::move(other)
             : std::move(plan);
}

absl::StatusOr<Schedule> MakeNamed(const PipelineSpec& spec, const std::string& name, double law,
                                   const std::vector<VPatternKind>& patterns, bool full,
                                   bool zbv = false, bool blocks = false, bool modulo = false) {
  PT_RETURN_IF_ERROR(CheckVSpec(spec));
  const CostModel costs = CostModelFor(spec, 2);
  const double cap = VPlanCap(spec, law);
  const int p = spec.num_workers, m = spec.num_microbatches;
  std::optional<ZbvResult> wave;
  if (zbv) {
    absl::StatusOr<ZbvResult> r = ZbvSchedule(p, m, costs, cap, name);
    if (r.ok()) {
      if (r->max_span <= VBusiestWork(costs, p) * m * (1 + 1e-9)) return std::move(r->schedule);
      wave = std::move(*r);
    }
  }
  std::optional<ModuloLane> lane;  // the modulo-block search, from here on
  if (modulo) lane.emplace(p, costs, cap, m);
  std::vector<TimedPattern> timed;  // the patterns' full-m timings, when taken below
  const bool polished = 6L * p * m <= kPolishMaxActions;  // the plan gets the order polish
  std::vector<ScreenedPattern> screened;  // patterns run on PlanBestV's screening prefix below
  double chunk = 0.0;
  for (const StageCost& c : costs.stages) chunk = std::max(chunk, c.activation);
  // The limit counts chunk-0 microbatches between their F and chunk-0 B, each holding its whole
  // chunk-0 activation a0, and an F needs mem + a0 <= cap: K >= floor(cap / a0) cannot bind.
  // (Every worker: the one with the smallest a0 admits the most.)
  double no_limit_from = 0.0;
  for (int w = 0; w < p; ++w) {
    const double a0 = costs.stages[w].activation;
    no_limit_from = a0 > 0 ? std::max(no_limit_from, std::floor((cap + 1e-6) / a0)) : 1e300;
    if (a0 <= 0) break;
  }
  std::vector<VVariant> variants =
      GreedyVariants(p, chunk > 0 ? cap / chunk : 2.0 * p, full, no_limit_from);
  if (blocks) {
    for (VVariant& v : BlockVariants()) variants.push_back(std::move(v));
    for (VVariant& v : SearchedBlockVariants(p, costs, cap)) variants.push_back(std::move(v));
  }
  std::function<std::vector<VVariant>()> later;  // PlanBestV's `later`
  if (modulo) {
    // The patterns' spans at full m bound which block periods can still win (one timing each).
    double beat = wave ? wave->max_span : 1e300;
    const std::vector<double> held = ChainMemoryTime(costs, VPlacement(p), p);
    for (VPatternKind plain : patterns) {
      if (plain != VPatternKind::kMin && plain != VPatternKind::kHalf) continue;
      // Of a pattern and its reordered variant PlanBestV runs one at full m (the one faster on
      // its screening prefix); timing that one here serves both (v-half at p = 64, m = 1024:
      // one full-m timing of ~10 ms less).
      // Not where the plan is polished: the bound is then the plain pattern's, looser where
      // the reordered one is faster, since the polish can reverse a close ranking (below).
      const VPatternKind kind =
          polished ? plain : VPatternToRun(plain, patterns, p, m, costs, cap, name, &screened);
      Schedule s = MakeVPattern(kind, p, m, name);
      if (beat < 1e300 && !held.empty()) {
        // A pattern whose memory alone keeps it from beating `beat` is not timed here (at
        // p = 64, m = 1024 one timing is ~50M instructions): its peaks (timing-free) bound its
        // span below (ChainMemoryTime), and it goes to PlanBestV untimed, which runs it should
        // it ever matter (V-Min's pattern at 22 units after V-Half's 4094.25 at p = 64, m = 1024,
        // 1:1.5:0.5 with comm 0.2: at least 4925). Over the cap it is what the timing would say.
        const VOrderPeaks peaks = PeaksOfVOrder(s, costs, cap);
        if (!peaks.within_cap) {
          timed.push_back(TimedPattern{kind, std::nullopt});
          continue;
        }
        double least = 0.0;
        for (int w = 0; w < p; ++w) {
          if (peaks.peak[w] > 0) least = std::max(least, m * held[w] / peaks.peak[w]);
        }
        if (least > beat * (1 + 1e-9) + 1e-9) continue;
      }
      const VOrderEval e = EvaluateVOrder(s, costs, cap);
      if (e.ok) beat = std::min(beat, e.max_span);
      TimedPattern t{kind, std::nullopt};
      if (e.ok && *std::max_element(e.peak.begin(), e.peak.end()) <= cap + 1e-9) {
        t.plan = VPlan{std::move(s), e.max_span, e.makespan, e.peak, VPatternLabel(kind)};
      }
      timed.push_back(std::move(t));
    }
    lane->SetBeat(beat);
    later = [&lane] { return lane->Take(); };
  }
  // With a wave schedule in hand, only candidates that can beat its span matter. Where the plan
  // gets the order polish, a close runner-up is polished too: the polish can reverse a small
  // lead (v-half p=12 m=24 1:1.5:0.5 comm 0.2: the reordered pattern 123.8 before the polish,
  // 120.35 after; a modulo block 124.05 before, 119.7 after).
  std::optional<VPlan> second;
  absl::StatusOr<VPlan> plan = PlanBestV(
      p, m, costs, cap, patterns, std::move(variants), name, wave ? wave->max_span : 1e300,
      polished ? &second : nullptr, std::move(timed), screened, later);
  if (wave && (!plan.ok() || wave->max_span < plan->max_span - 1e-9 ||
               (wave->max_span < plan->max_span + 1e-9 && wave->makespan <= plan->makespan))) {
    return Finished(std::move(wave->schedule), costs, cap, wave->max_span);
  }
  if (!plan.ok()) return plan.status();
  Schedule first = Finished(std::move(plan->schedule), costs, cap, plan->max_span);
  if (!second) return first;
  Schedule other = Finished(std::move(second->schedule), costs, cap);
  return LongestSpan(other, costs) < LongestSpan(first, costs) - 1e-9 ? std::move(other)
                                                                       : std::move(first);
}

}  // namespace

double VPlanCap(const PipelineSpec& spec, double law) {
  double cap = law;
  if (spec.memory_limit > 0) cap = std::min(cap, spec.memory_limit);
  return std::max(cap, OneMicrobatch(CostModelFor(spec, 2), spec.num_workers));
}

int VMinPeakLaw(int p) { return (p + 4) / 3; }
int VHalfPeakLaw(int p) { return (p + 2) / 2; }
int VZbPeakLaw(int p) { return p; }

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

absl::StatusOr<Schedule> MakeVMin(const PipelineSpec& spec) {
  return MakeNamed(spec, "v-min", VMinPeakLaw(spec.num_workers),
                   {VPatternKind::kMin, VPatternKind::kMinReordered}, true, /*zbv=*/false,
                   /*blocks=*/false, /*modulo=*/true);
}
absl::StatusOr<Schedule> MakeVHalf(const PipelineSpec& spec) {
  return MakeNamed(spec, "v-half", VHalfPeakLaw(spec.num_workers),
                   {VPatternKind::kHalf, VPatternKind::kMin, VPatternKind::kHalfReordered}, true,
                   /*zbv=*/false, /*blocks=*/true, /*modulo=*/true);
}
absl::StatusOr<Schedule> MakeVZb(const PipelineSpec& spec) {
  return MakeNamed(spec, "v-zb", VZbPeakLaw(spec.num_workers),
                   {VPatternKind::kHalf, VPatternKind::kMin}, true, /*zbv=*/true);
}
absl::StatusOr<Schedule> MakeZbV(const PipelineSpec& spec) {
  return MakeNamed(spec, "zb-v", VZbPeakLaw(spec.num_workers), {}, false, /*zbv=*/true);
}
absl::StatusOr<Schedule> MakeVAdaptive(const PipelineSpec& spec) {
  if (spec.memory_limit <= 0) {
    return absl::InvalidArgumentError(
        "memory_limit must be > 0 for v-adaptive (peak activation units per worker)");
  }
  // Above 2p units nothing changes: every V schedule is done by then.
  return MakeNamed(spec, "v-adaptive", 2.0 * spec.num_workers,
                   {VPatternKind::kHalf, VPatternKind::kMin}, true, /*zbv=*/false,
                   /*blocks=*/false, /*modulo=*/true);
}

}  // namespace pipetrain::schedule
