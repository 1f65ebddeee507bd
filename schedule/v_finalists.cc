#include "schedule/v_finalists.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "schedule/building_block.h"

namespace pipetrain::schedule {

const char* VPatternLabel(VPatternKind kind) {
  switch (kind) {
    case VPatternKind::kMin: return "pattern v-min";
    case VPatternKind::kHalf: return "pattern v-half";
    case VPatternKind::kMinReordered: return "pattern v-min, reordered";
    default: return "pattern v-half, reordered";
  }
}

double VBusiestWork(const CostModel& costs, int p) {
  double most = 0.0;
  for (int w = 0; w < p; ++w) {
    const StageCost& x = costs.stages[w];
    const StageCost& y = costs.stages[2 * p - 1 - w];
    most = std::max(most, x.f + x.b + x.w + y.f + y.b + y.w);
  }
  return most;
}

namespace {

VPatternKind Partner(VPatternKind kind) {
  switch (kind) {
    case VPatternKind::kMin: return VPatternKind::kMinReordered;
    case VPatternKind::kMinReordered: return VPatternKind::kMin;
    case VPatternKind::kHalf: return VPatternKind::kHalfReordered;
    default: return VPatternKind::kHalf;
  }
}

// Pattern j's screened span `theirs` beats pattern i's `mine` (ties: the lower index).
bool ScreensFaster(double theirs, int j, double mine, int i) {
  return theirs < mine - 1e-9 || (theirs < mine + 1e-9 && j < i);
}

}  // namespace

int VScreenMicrobatches(int num_workers) { return std::max(2 * num_workers, 24); }

VPatternKind VPatternToRun(VPatternKind kind, const std::vector<VPatternKind>& patterns, int p,
                           int m, const CostModel& costs, double cap, const std::string& name,
                           std::vector<ScreenedPattern>* screened) {
  const int screen_m = VScreenMicrobatches(p);
  const auto mine = std::find(patterns.begin(), patterns.end(), kind);
  const auto other = std::find(patterns.begin(), patterns.end(), Partner(kind));
  if (m <= screen_m || mine == patterns.end() || other == patterns.end()) return kind;
  auto screen = [&](VPatternKind k) {  // as PlanBestV's screening (a miss: no span)
    const VOrderEval e = EvaluateVOrder(MakeVPattern(k, p, screen_m, name), costs, cap);
    const bool fits = e.ok && *std::max_element(e.peak.begin(), e.peak.end()) <= cap + 1e-9;
    screened->push_back(ScreenedPattern{k, fits, e.max_span, e.makespan});
    return fits ? e.max_span : 1e300;
  };
  const int i = static_cast<int>(mine - patterns.begin());
  const int j = static_cast<int>(other - patterns.begin());
  const double mine_span = screen(kind);
  return ScreensFaster(screen(*other), j, mine_span, i) ? *other : kind;
}

namespace {

struct Scored {
  double span = 0.0, makespan = 0.0;
  int index = 0;  // < 0: pattern -index-1, else greedy variant
};

// Runs candidate `index` (see Scored) for m microbatches; nullopt if it does not fit the cap or
// if its longest worker span is certain to exceed `abort_span` (then *pruned = true). `record`
// = false: the greedy engine does not materialise its actions (for screening). `trend_span`: a
// greedy variant's run also stops (pruned) when its pace at 3/8 of the run puts it past this
// (VGreedyOptions::trend_abort_span; `late_limits`: VGreedyOptions::late_limits).
std::optional<VPlan> RunCandidate(int index, int p, int m, const CostModel& costs, double cap,
                                  const std::vector<VPatternKind>& patterns,
                                  const std::vector<VVariant>& variants, const std::string& name,
                                  absl::Status& error, double abort_span, bool record, bool* pruned,
                                  double trend_span = 1e300,
                                  std::function<bool(double*, double*)> late_limits = {}) {
  *pruned = false;
  if (index < 0) {
    const VPatternKind kind = patterns[-index - 1];
    Schedule s = MakeVPattern(kind, p, m, name);
    const VOrderEval e = EvaluateVOrder(s, costs, cap, abort_span);
    *pruned = e.pruned;
    if (!e.ok || *std::max_element(e.peak.begin(), e.peak.end()) > cap + 1e-9) return std::nullopt;
    return VPlan{std::move(s), e.max_span, e.makespan, e.peak,
                 VPatternLabel(kind)};
  }
  const VVariant& variant = variants[index];
  if (variant.block.has_value() || variant.fixed_block.has_value()) {
    Schedule s = RepeatBlock(
        variant.fixed_block ? *variant.fixed_block : MakeVBlock(p, costs, *variant.block), m, name);
    const VOrderEval e = EvaluateVOrder(s, costs, cap, abort_span);
    *pruned = e.pruned;
    if (!e.ok || *std::max_element(e.peak.begin(), e.peak.end()) > cap + 1e-9) return std::nullopt;
    return VPlan{std::move(s), e.max_span, e.makespan, e.peak, variant.label};
  }
  VGreedyOptions options = variant.options;
  options.memory_cap = cap;
  options.abort_span = abort_span;
  options.trend_abort_span = trend_span;
  options.late_limits = std::move(late_limits);
  options.record = record;
  if (variant.inflight > 0) options.max_inflight.assign(p, variant.inflight);
  absl::StatusOr<VGreedyResult> r = GreedyScheduleV(p, m, costs, options, name);
  if (!r.ok()) {
    error = r.status();
    return std::nullopt;
  }
  if (r->pruned) {
    *pruned = true;
    return std::nullopt;
  }
  return VPlan{std::move(r->schedule), r->max_span, r->makespan, std::move(r->peak), variant.label};
}

bool Better(const VPlan& a, const std::optional<VPlan>& best) {
  return !best || a.max_span < best->max_span - 1e-9 ||
         (a.max_span < best->max_span + 1e-9 && a.makespan < best->makespan - 1e-9);
}

constexpr double kNoLimit = 1e300;

// From this many actions (6 p m) up, PlanBestV's look-ahead runs its two finalists side by side
// where there is a second core (below that a run takes about a millisecond or less).
constexpr long kParallelLookAheadActions = 1L << 16;

// A candidate's predicted span at full m; kNoLimit if none (it runs last and is never skipped).
double Prediction(const std::vector<std::pair<int, double>>& predicted, int index) {
  for (const auto& [i, span] : predicted) {
    if (i == index) return span;
  }
  return kNoLimit;
}

}  // namespace

absl::StatusOr<VPlan> PlanBestV(int num_workers, int num_microbatches, const CostModel& costs,
                                double cap, const std::vector<VPatternKind>& patterns,
                                std::vector<VVariant> variants, const std::string& name,
                                double beat_span, std::optional<VPlan>* close_second,
                                std::vector<TimedPattern> timed,
                                const std::vector<ScreenedPattern>& screened_patterns,
                                const std::function<std::vector<VVariant>()>& later) {
  constexpr double kClose = 1.02;  // see close_second
  const int p = num_workers, m = num_microbatches;
  // A pattern the caller timed at full m is a plan in hand, like beat_span's: where no close
  // runner-up is wanted, a candidate that cannot beat it is stopped or skipped the same way (at
  // p = 64, m = 1024 most greedy variants then stop early in the screening), and it competes at
  // the end even where the screening preferred another pattern.
  int in_hand = -1;  // index into timed
  if (close_second == nullptr) {
    for (int i = 0; i < static_cast<int>(timed.size()); ++i) {
      if (timed[i].plan && (in_hand < 0 || Better(*timed[i].plan, timed[in_hand].plan))) {
        in_hand = i;
      }
    }
    if (in_hand >= 0) beat_span = std::min(beat_span, timed[in_hand].plan->max_span);
  }
  absl::Status error = absl::InternalError("no V candidate fits the memory cap");
  // Screen on a prefix when m is large: the steady state is periodic, so the ranking on
  // 2p microbatches carries over; only the best few run at full m.
  const int screen_m = std::max(2 * p, 24);
  const bool screens = m > screen_m && patterns.size() + variants.size() > 2;
  // `later`'s candidates are screened after the others (the caller may make them meanwhile);
  // where nothing is screened they are made first.
  const int from_later = static_cast<int>(variants.size());
  auto take_later = [&] {
    for (VVariant& v : later()) variants.push_back(std::move(v));
  };
  if (later && !screens) take_later();
  std::vector<int> all;
  for (int i = 0; i < static_cast<int>(patterns.size()); ++i) all.push_back(-i - 1);
  for (int i = 0; i < static_cast<int>(variants.size()); ++i) all.push_back(i);
  std::vector<int> finalists = all;
  std::vector<std::pair<int, double>> predicted;  // (candidate, predicted span at full m)
  std::vector<Scored> scored;                      // the screening's results
  const double slack = VBusiestWork(costs, p);       // one microbatch of the busiest worker
  // A plan to beat (beat_span, e.g. the ZB-V wave) is a full-m span like the best so far: a
  // finalist predicted worse than it by more than the slack is skipped (below). Every
  // prediction is at least the screened span plus `slack` per further microbatch, so a greedy or
  // block variant whose screened span passes `hopeless_at` would be skipped for certain: its
  // screening stops there and it is dropped (at p = 64, m = 1024 each such candidate ran in full
  // before, most of them at full m too). Not where a close runner-up is wanted (the polish).
  const bool beat_skips = close_second == nullptr && beat_span < kNoLimit;
  const double hopeless_at = beat_skips ? beat_span + slack - slack * (m - screen_m) : kNoLimit;
  std::vector<int> hopeless;  // variants stopped at hopeless_at in the screening
  if (screens) {
    // Only the best two and the best of each family (pattern, greedy, block) matter below, so a
    // candidate is stopped once its span is certain to exceed both the second-best span so far
    // and its family's best so far (both only fall, so a stopped candidate stays irrelevant).
    // Promising candidates run first to tighten those bounds early: the patterns, the blocks,
    // then the greedy variants with an in-flight limit.
    auto family = [&](int index) {
      if (index < 0) return 0;
      return variants[index].block.has_value() || variants[index].fixed_block.has_value() ? 2 : 1;
    };
    std::vector<int> order = all;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      auto key = [&](int i) {
        const int f = family(i);
        if (f != 1) return f == 0 ? 0 : 1;
        return variants[i].inflight > 0 ? 2 : 3;
      };
      return key(a) < key(b);
    });
    double s1 = kNoLimit, s2 = kNoLimit;
    double family_best[3] = {kNoLimit, kNoLimit, kNoLimit};
    auto screen = [&](int index) {
      double bound = std::max(s2, family_best[family(index)]);
      // (The patterns always run: their screened spans also rank their reordered partners.)
      const bool at_hopeless = index >= 0 && hopeless_at <= bound;
      if (at_hopeless) bound = hopeless_at;
      const ScreenedPattern* known = nullptr;
      for (const ScreenedPattern& sp : screened_patterns) {
        if (index < 0 && sp.kind == patterns[-index - 1]) known = &sp;
      }
      double span = 0.0, makespan = 0.0;
      if (known != nullptr) {
        // Taken as its run would end: refused over the cap, stopped past the bound.
        if (!known->fits || known->span > bound + 1e-7 * (1.0 + std::abs(bound))) return;
        span = known->span;
        makespan = known->makespan;
      } else {
        bool pruned = false;
        std::optional<VPlan> r = RunCandidate(index, p, screen_m, costs, cap, patterns, variants,
                                              name, error, bound, /*record=*/false, &pruned);
        if (!r && pruned && at_hopeless) hopeless.push_back(index);
        if (!r) return;
        span = r->max_span;
        makespan = r->makespan;
      }
      scored.push_back({span, makespan, index});
      if (span < s1) {
        s2 = s1;
        s1 = span;
      } else if (span < s2) {
        s2 = span;
      }
      double& fb = family_best[family(index)];
      fb = std::min(fb, span);
    };
    for (int index : order) screen(index);
    // The later candidates (after the others: which of them is a finalist does not depend on
    // the order, since a candidate stopped at a bound already lost to the ones that set it).
    if (later) {
      take_later();
      for (int i = from_later; i < static_cast<int>(variants.size()); ++i) {
        all.push_back(i);
        screen(i);
      }
    }
    // Rank in the candidates' own order (ties keep it), as if all had run to the end.
    auto position = [&](int index) { return index < 0 ? -index - 1 : index + 1000000; };
    std::sort(scored.begin(), scored.end(),
              [&](const Scored& a, const Scored& b) { return position(a.index) < position(b.index); });
    std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
      return a.span < b.span - 1e-9 || (a.span < b.span + 1e-9 && a.makespan < b.makespan);
    });
    finalists.clear();
    for (size_t i = 0; i < scored.size() && i < 2; ++i) finalists.push_back(scored[i].index);
    // Also the best of each family (greedy, repeated block): their bubbles fall with m at
    // different rates, so the prefix ranking across families is not reliable.
    for (bool block : {false, true}) {
      for (const Scored& sc : scored) {
        if (sc.index < 0) continue;
        const VVariant& v = variants[sc.index];
        if ((v.block.has_value() || v.fixed_block.has_value()) != block) continue;
        if (std::find(finalists.begin(), finalists.end(), sc.index) == finalists.end()) {
          finalists.push_back(sc.index);
        }
        break;
      }
    }
    // The fixed patterns always run at full m (never worse than the authors' pattern), and the
    // plain backward-first greedy always fits (admission control): a safe fallback. A pattern
    // and its reordered variant share the steady state (only warm-up and cool-down differ, and
    // the prefix has both), so of such a pair only the one screened faster runs.
    auto screened = [&](int index) {
      for (const Scored& sc : scored) {
        if (sc.index == index) return sc.span;
      }
      return kNoLimit;
    };
    auto outrun = [&](int i) {  // pattern i's partner screened faster (ties: lower index)
      const auto other = std::find(patterns.begin(), patterns.end(), Partner(patterns[i]));
      if (other == patterns.end()) return false;
      const int j = static_cast<int>(other - patterns.begin());
      return ScreensFaster(screened(-j - 1), j, screened(-i - 1), i);
    };
    for (int i = 0; i < static_cast<int>(patterns.size()); ++i) {
      if (std::find(finalists.begin(), finalists.end(), -i - 1) == finalists.end()) {
        finalists.push_back(-i - 1);
      }
    }
    finalists.erase(std::remove_if(finalists.begin(), finalists.end(),
                                   [&](int index) { return index < 0 && outrun(-index - 1); }),
                    finalists.end());
    if (std::find(finalists.begin(), finalists.end(), 0) == finalists.end()) finalists.push_back(0);
    finalists.erase(std::remove_if(finalists.begin(), finalists.end(),
                                   [&](int index) {
                                     return std::find(hopeless.begin(), hopeless.end(), index) !=
                                            hopeless.end();
                                   }),
                    finalists.end());
    // Predict each finalist's span at full m. A pattern or repeated block is periodic: past the
    // warm-up every extra microbatch adds one steady-state period, so the difference of two
    // prefixes (the screen and a shorter one) cancels warm-up and cool-down. The greedy is not
    // periodic (its rate over a prefix can be above its later one), so it gets the optimistic
    // estimate: from the screen on, no bubble at all. Full-m runs then go best-predicted first,
    // and a finalist predicted worse than the best full-m span so far by more than one
    // microbatch of the busiest worker's work is skipped: re-running every finalist at full m
    // cost more than the whole screening.
    const int short_m = screen_m - std::max(1, screen_m / 4);
    for (int index : finalists) {
      const double at_screen = screened(index);
      if (at_screen >= kNoLimit) continue;  // pruned in the screening: no estimate, runs
      if (family(index) == 1) {
        predicted.emplace_back(index, at_screen + slack * (m - screen_m));
        continue;
      }
      bool pruned = false;
      std::optional<VPlan> r = RunCandidate(index, p, short_m, costs, cap, patterns, variants,
                                            name, error, kNoLimit, /*record=*/false, &pruned);
      if (!r) continue;
      // No steady state is faster than the busiest worker's work per microbatch (a shorter
      // difference means the short prefix had not left the warm-up yet).
      const double rate = std::max(slack, (at_screen - r->max_span) / (screen_m - short_m));
      predicted.emplace_back(index, at_screen + rate * (m - screen_m));
    }
    std::stable_sort(finalists.begin(), finalists.end(), [&](int a, int b) {
      return Prediction(predicted, a) < Prediction(predicted, b);
    });
  }
  // Full m: a candidate that cannot beat the best so far (or beat_span) is stopped early.
  // A greedy finalist that screened exactly like one already run (span and makespan, to the
  // last bit) is taken to be the same plan: a rule that never fires on this input leaves the
  // order as it is, and a tie cannot win, while re-running it at full m costs as much again.
  auto screening = [&](int index) -> const Scored* {
    for (const Scored& sc : scored) {
      if (sc.index == index) return &sc;
    }
    return nullptr;
  };
  // The margin a greedy's extrapolated full-m span must pass the best full-m span so far by (and
  // the slack) to be stopped or skipped for its trend: see trend_loses and greedy_trend below.
  constexpr double kTrendMargin = 1.10;
  // A greedy's full-m run at large sizes (m >= 8p: a quarter of the run is past the warm-up) also
  // stops when its own pace at 3/8 of the run puts it past `beaten` x kTrendMargin + the slack
  // (VGreedyOptions::trend_abort_span; not a bound, like trend_loses' estimate from two prefixes,
  // but one from the run's steady state). At p = 64, m = 1024, 1:1.5:0.5 with comm 0.2 and
  // v-adaptive's limit 40, a greedy whose prefix trend said 3829 ran in full to 4502 against a
  // block's 3944.6 (20 ms); its pace stops it after 3/8.
  auto greedy_trend = [&](double beaten) {
    return close_second == nullptr && m >= 8 * p && beaten < kNoLimit
               ? beaten * kTrendMargin + slack
               : kNoLimit;
  };
  // A full-m run; a pattern the caller timed already is taken from `timed` (each runs at full m
  // once at most). Its timing had no bound but beat_span's: a run stopped at a lower bound
  // would not have been Better either.
  auto run_full = [&](int index, double bound, bool* pruned) -> std::optional<VPlan> {
    if (index < 0) {
      for (TimedPattern& t : timed) {
        if (t.kind == patterns[-index - 1]) {
          *pruned = false;
          if (t.plan && t.plan->max_span > beat_span + 1e-7 * (1.0 + std::abs(beat_span))) {
            return std::nullopt;
          }
          std::optional<VPlan> out = std::move(t.plan);
          t.plan.reset();  // taken: the plan in hand (below) is then among the results already
          return out;
        }
      }
    }
    return RunCandidate(index, p, m, costs, cap, patterns, variants, name, error, bound,
                        /*record=*/true, pruned, greedy_trend(bound));
  };
  std::vector<const Scored*> ran;
  std::optional<VPlan> best;
  // Look-ahead (same result, less work): the first finalist runs with no bound, and when it is
  // a greedy its optimistic prediction often puts it before a pattern or block that beats it by
  // far (p = 64, m = 1024, 1:1.5:0.5 with comm 0.2: a greedy at 5543 ran in full before V-Half's
  // pattern at 4092). The periodic second finalist then runs first, and the greedy is stopped at
  // its span. Its loss is then certain, and so is the second finalist's run in the plain order
  // (its prediction is within the slack of its own span, hence of the greedy's), so the best
  // after both is the second finalist, as it would have been. Otherwise the greedy runs in full
  // and both results go through the plain order's rules below.
  auto periodic = [&](int index) {
    return index < 0 || variants[index].block.has_value() || variants[index].fixed_block.has_value();
  };
  // A greedy finalist's trend (large sizes only, where no close runner-up is wanted): its span
  // on the screen and on a shorter prefix give its rate; a greedy whose span at full m would,
  // at that rate, pass the best full-m span so far by more than kTrendMargin (and the slack) is
  // not run at full m. This is not a bound (a greedy's later rate can differ from its prefix's
  // either way); it is the margin that the greedy's full-m spans kept on the tested grid, where
  // the rate at full m was at most 3% better than the trend's and usually worse (up to 18%):
  // p = 64, m = 1024, 1:1.5:0.5 with comm 0.2, V-Min's greedy ran to 7898 against the pattern's
  // 6022 (trend 8004), V-Half's to 5543 against 4092 (trend 5447), each a full-m run of
  // 393k actions that lost (`gen_fingerprint`'s cases: the same plans with and without it).
  auto trend_loses = [&](int index, double best_span, absl::Status& run_error) {
    if (close_second != nullptr || index < 0 || index >= static_cast<int>(variants.size()) ||
        periodic(index) || !(best_span < kNoLimit)) {
      return false;
    }
    const Scored* at_screen = nullptr;
    for (const Scored& sc : scored) {
      if (sc.index == index) at_screen = &sc;
    }
    if (at_screen == nullptr) return false;
    const double limit = best_span * kTrendMargin + slack;
    if (at_screen->span + slack * (m - screen_m) > limit) return true;  // (the rate is >= slack)
    // The rate passes the limit only if the shorter prefix spans less than `below`: its run stops
    // once it is certain to span more (a margin above `below` for the rounding; then no skip).
    const int short_m = screen_m - std::max(1, screen_m / 4);
    const double below =
        at_screen->span - (limit - at_screen->span) * (screen_m - short_m) / (m - screen_m);
    bool pruned = false;
    std::optional<VPlan> r =
        RunCandidate(index, p, short_m, costs, cap, patterns, variants, name, run_error,
                     below + 1e-6 * (1.0 + std::abs(below)), /*record=*/false, &pruned);
    if (!r) return false;
    const double rate = std::max(slack, (at_screen->span - r->max_span) / (screen_m - short_m));
    return at_screen->span + rate * (m - screen_m) > limit;
  };
  std::optional<VPlan> early_first, early_second;
  bool first_loses = false, second_ran = false;
  // (Not when the second finalist is skipped for beat_span anyway: see the loop below.)
  auto skipped_for_beat = [&](int index) {
    const double guess = Prediction(predicted, index);
    return beat_skips && guess < kNoLimit && guess > beat_span + slack;
  };
  if (close_second == nullptr && finalists.size() >= 2 && finalists[0] >= 0 &&
      finalists[0] < static_cast<int>(variants.size()) && !periodic(finalists[0]) &&
      finalists[1] < static_cast<int>(variants.size()) && periodic(finalists[1]) &&
      !skipped_for_beat(finalists[1])) {
    const int first = finalists[0], second = finalists[1];
    // What the look-ahead does with the first finalist once the second's full-m run is in.
    enum class Then { kLoses, kRun, kSkip };
    auto then = [&](absl::Status& run_error) {
      if (!early_second) return Then::kSkip;
      if (trend_loses(first, early_second->max_span, run_error)) return Then::kLoses;
      const double guess = Prediction(predicted, second);
      return guess >= kNoLimit || guess <= early_second->max_span + slack ? Then::kRun
                                                                          : Then::kSkip;
    };
    auto beaten = [&] { return std::min(beat_span, early_second->max_span); };
    bool pruned = false;
    Then next = Then::kSkip;
    // A pattern the caller timed is no run (run_full takes its plan).
    const bool second_timed =
        second < 0 && std::any_of(timed.begin(), timed.end(), [&](const TimedPattern& t) {
          return t.kind == patterns[-second - 1];
        });
    if (!second_timed && 6L * p * m >= kParallelLookAheadActions &&
        std::thread::hardware_concurrency() > 1) {
      // Both runs at once: the second (and what follows from it, `then`) on a thread of its own,
      // the first (a greedy) with only beat_span until its trend moment, where it takes the
      // bounds it would have had after the second's run (VGreedyOptions::late_limits) and ends
      // as it would have then. p = 64, m = 1024, 1:1.5:0.5 with comm 0.2, v-adaptive: a
      // block's 6.8 ms and the greedy's prefix trend (1.9 ms) beside the first 3/8 of a greedy
      // (~8.5 ms) instead of before it. (Where `then` ends the look-ahead, the greedy's 3/8 are
      // spent for nothing, on the other core, while the second runs.)
      Then decided = Then::kSkip;
      absl::Status first_error, second_error;
      std::jthread second_run([&] {
        bool unused = false;
        early_second = run_full(second, beat_span, &unused);
        decided = then(second_error);
      });
      std::optional<VPlan> r = RunCandidate(
          first, p, m, costs, cap, patterns, variants, name, first_error, beat_span,
          /*record=*/true, &pruned, kNoLimit, [&](double* abort_span, double* trend_span) {
            second_run.join();
            if (decided != Then::kRun) return false;
            *abort_span = beaten();
            *trend_span = greedy_trend(beaten());
            return true;
          });
      // (Stopped before its trend moment, past beat_span: so it would have been with the
      // second's bounds, which are lower.)
      if (second_run.joinable()) second_run.join();
      if (!second_error.ok()) error = second_error;
      next = decided;
      if (next == Then::kRun) {
        early_first = std::move(r);
        if (!first_error.ok()) error = first_error;
      }
    } else {
      early_second = run_full(second, beat_span, &pruned);
      next = then(error);
      if (next == Then::kRun) {
        early_first = RunCandidate(first, p, m, costs, cap, patterns, variants, name, error,
                                   beaten(), /*record=*/true, &pruned, greedy_trend(beaten()));
      }
    }
    second_ran = true;
    // kLoses: as if its full-m run had been stopped at the second's span.
    first_loses = next == Then::kLoses || (next == Then::kRun && !early_first && pruned);
  }
  for (size_t position = 0; position < finalists.size(); ++position) {
    const int index = finalists[position];
    if (index >= static_cast<int>(variants.size())) continue;
    const Scored* mine = index >= 0 && !variants[index].block && !variants[index].fixed_block
                             ? screening(index)
                             : nullptr;
    if (mine != nullptr &&
        std::any_of(ran.begin(), ran.end(), [&](const Scored* other) {
          return other->span == mine->span && other->makespan == mine->makespan;
        })) {
      continue;
    }
    if (mine != nullptr) ran.push_back(mine);
    const double guess = Prediction(predicted, index);
    const double beaten = std::min(best ? best->max_span : kNoLimit, beat_skips ? beat_span : kNoLimit);
    if (beaten < kNoLimit && guess < kNoLimit && guess > beaten + slack) continue;
    if (best && !(position == 0 && (first_loses || early_first)) &&
        trend_loses(index, best->max_span, error)) {
      continue;
    }
    bool pruned = false;
    double bound = best ? std::min(best->max_span, beat_span) : beat_span;
    if (close_second != nullptr && best) bound = std::min(best->max_span * kClose, beat_span);
    std::optional<VPlan> r;
    if (position == 0 && first_loses) {
      // Certain to lose to the second finalist (see the look-ahead above).
    } else if (position == 0 && early_first) {
      r = std::move(early_first);
    } else if (position == 1 && second_ran) {
      // Run with no bound but beat_span: a run the plain order stops at `bound` would not be
      // Better either (and one that did not fit or passed beat_span does not under `bound`).
      r = std::move(early_second);
    } else {
      r = run_full(index, bound, &pruned);
    }
    if (!r) continue;
    if (Better(*r, best)) std::swap(r, best);
    if (close_second != nullptr && r && r->max_span <= best->max_span * kClose &&
        Better(*r, *close_second)) {
      *close_second = std::move(r);
    }
  }
  if (in_hand >= 0 && timed[in_hand].plan && Better(*timed[in_hand].plan, best)) {
    best = std::move(timed[in_hand].plan);
  }
  if (!best) return error;
  if (close_second != nullptr && *close_second &&
      (*close_second)->max_span > best->max_span * kClose) {
    close_second->reset();
  }
  return std::move(*best);
}

}  // namespace pipetrain::schedule
