#include "schedule/order_polish.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "schedule/tolerance.h"
#include "schedule/xorshift.h"

namespace pipetrain::schedule {
namespace {

// ASAP timing of compute-only orders (the dependencies and memory model Simulate uses), keeping
// every action's start and end for the critical-path walk. Buffers live across calls.
//
// A trial move changes one worker's list from some position on; everything that started before
// the first moved action did keeps its time (its inputs ended earlier still, so none of them is
// a moved action or one after it). So a trial copies that prefix of every worker from the kept
// base timing and times only the rest: with moves spread along the lists about half the work
// of a full timing, and little near the end of the lists.
class Timer {
 public:
  Timer(const Schedule& s, const CostModel& costs) : s_(s), costs_(costs) {
    for (Timing* t : {&base_, &trial_}) {
      const size_t cells = static_cast<size_t>(s.num_stages) * s.num_microbatches;
      t->end_f.resize(cells);
      t->end_b.resize(cells);
      t->start.resize(s.num_workers);
      t->end.resize(s.num_workers);
      t->mem.resize(s.num_workers);
    }
  }

  struct Result {
    bool ok = false;  // ran to the end within the cap and the span limit
    double max_span = 0.0;
    double total_end = 0.0;  // sum of every action's end: lower = everything earlier
    int longest = 0;  // worker with the longest span
    int64_t timed = 0;  // actions this run timed (the rest were copied from the base)
  };

  // Times `orders`; stops (ok = false) on deadlock, when a worker's memory exceeds `cap`, or once
  // a worker's span is certain to exceed `span_limit`. With `changed` >= 0, `orders` must equal
  // the base's order except on worker `changed` from position `from` on, and the base's prefix
  // is reused. Keep() makes a successful run the base.
  Result Run(const std::vector<std::vector<Action>>& orders, double cap, double span_limit,
             int changed = -1, size_t from = 0) {
    Result r;
    const int p = s_.num_workers;
    Timing& t = trial_;
    std::vector<size_t> head(p, 0);
    if (changed >= 0) {
      // Whatever started before the first changed position's action keeps its time.
      const double cut = base_.start[changed][from];
      for (int w = 0; w < p; ++w) {
        const std::vector<double>& starts = base_.start[w];
        head[w] = std::lower_bound(starts.begin(), starts.end(), cut) - starts.begin();
      }
      head[changed] = std::min(head[changed], from);
      t.end_f = base_.end_f;
      t.end_b = base_.end_b;
    } else {
      std::fill(t.end_f.begin(), t.end_f.end(), -1.0);
      std::fill(t.end_b.begin(), t.end_b.end(), -1.0);
    }
    std::vector<double> clock(p, 0.0), mem(p, 0.0), rem(p, 0.0);
    size_t done = 0, total = 0;
    for (int w = 0; w < p; ++w) {
      const std::vector<Action>& list = orders[w];
      total += list.size();
      done += head[w];
      t.start[w].resize(list.size());
      t.end[w].resize(list.size());
      t.mem[w].resize(list.size());
      const size_t h = head[w];
      if (h > 0) {
        std::copy_n(base_.start[w].begin(), h, t.start[w].begin());
        std::copy_n(base_.end[w].begin(), h, t.end[w].begin());
        std::copy_n(base_.mem[w].begin(), h, t.mem[w].begin());
        clock[w] = t.end[w][h - 1];
        mem[w] = t.mem[w][h - 1];
      }
      for (size_t k = h; k < list.size(); ++k) {  // what is timed again has not run yet
        const Action& a = list[k];
        rem[w] += Duration(a);
        if (a.kind == ActionKind::kF) t.end_f[Cell(a.stage, a.microbatch)] = -1.0;
        if (a.kind == ActionKind::kB || a.kind == ActionKind::kBW) {
          t.end_b[Cell(a.stage, a.microbatch)] = -1.0;
        }
      }
    }
    r.timed = static_cast<int64_t>(total - done);
    std::vector<int> active;
    for (int w = p - 1; w >= 0; --w) active.push_back(w);
    const double limit = span_limit + 1e-7 * (1.0 + std::abs(span_limit));
    while (!active.empty()) {
      const int w = active.back();
      active.pop_back();
      const auto& list = orders[w];
      while (head[w] < list.size()) {
        const Action& a = list[head[w]];
        const double ready = Ready(t, a);
        if (ready < 0) break;
        const double start = std::max(clock[w], ready);
        const double dur = Duration(a);
        const StageCost& c = costs_.stages[a.stage];
        if (a.kind == ActionKind::kF) {
          mem[w] += c.activation;
          if (mem[w] > cap + kEps) return r;
        } else if (a.kind == ActionKind::kB) {
          mem[w] -= c.freed_by_b;
        } else if (a.kind == ActionKind::kW) {
          mem[w] -= c.activation - c.freed_by_b;
        } else {
          mem[w] -= c.activation;
        }
        rem[w] -= dur;
        const double first = head[w] == 0 ? start : t.start[w][0];
        if (start + dur + rem[w] - first > limit) return r;
        t.start[w][head[w]] = start;
        t.end[w][head[w]] = start + dur;
        t.mem[w][head[w]] = mem[w];
        const size_t cell = Cell(a.stage, a.microbatch);
        if (a.kind == ActionKind::kF) {
          t.end_f[cell] = start + dur;
          if (a.stage + 1 < s_.num_stages) active.push_back(s_.stage_to_worker[a.stage + 1]);
          if (a.stage + 1 == s_.num_stages) active.push_back(w);
        } else if (a.kind == ActionKind::kB || a.kind == ActionKind::kBW) {
          t.end_b[cell] = start + dur;
          if (a.stage > 0) active.push_back(s_.stage_to_worker[a.stage - 1]);
        }
        clock[w] = start + dur;
        ++head[w];
        ++done;
      }
    }
    if (done != total) return r;
    r.ok = true;
    for (int w = 0; w < p; ++w) {
      if (orders[w].empty()) continue;
      const double span = t.end[w].back() - t.start[w][0];
      for (double e : t.end[w]) r.total_end += e;
      if (span > r.max_span) {
        r.max_span = span;
        r.longest = w;
      }
    }
    return r;
  }

  // The last Run (which must have succeeded) becomes the base: what Ready, Start and End
  // describe and what later trials reuse.
  void Keep() { std::swap(base_, trial_); }

  // Time the inputs of `a` are ready in the base (-1 while a producer has not run).
  double Ready(const Action& a) const { return Ready(base_, a); }
  double Start(int w, size_t k) const { return base_.start[w][k]; }
  double End(int w, size_t k) const { return base_.end[w][k]; }

 private:
  struct Timing {
    std::vector<double> end_f, end_b;  // per (stage, microbatch); -1 = not yet
    std::vector<std::vector<double>> start, end, mem;  // per worker and position (mem: after)
  };

  double Ready(const Timing& t, const Action& a) const {
    const int n = s_.num_stages;
    if (a.kind == ActionKind::kF) {
      if (a.stage == 0) return 0.0;
      const double e = t.end_f[Cell(a.stage - 1, a.microbatch)];
      return e < 0 ? e : e + Comm(a.stage - 1, a.stage);
    }
    if (a.kind == ActionKind::kW) return t.end_b[Cell(a.stage, a.microbatch)];
    const bool last = a.stage == n - 1;
    const int from = last ? a.stage : a.stage + 1;
    const double e = (last ? t.end_f : t.end_b)[Cell(from, a.microbatch)];
    return e < 0 ? e : e + Comm(from, a.stage);
  }
  size_t Cell(int stage, int mb) const {
    return static_cast<size_t>(stage) * s_.num_microbatches + mb;
  }
  double Comm(int from, int to) const {
    return s_.stage_to_worker[from] == s_.stage_to_worker[to] ? 0.0 : costs_.comm;
  }
  double Duration(const Action& a) const {
    const StageCost& c = costs_.stages[a.stage];
    switch (a.kind) {
      case ActionKind::kF: return c.f;
      case ActionKind::kB: return c.b;
      case ActionKind::kW: return c.w;
      default: return c.FusedBackward();
    }
  }

  const Schedule& s_;
  const CostModel& costs_;
  Timing base_, trial_;
};

// Whether `a` consumes what `b` produces (so `a` may not move ahead of `b` on one worker).
bool DependsOn(const Action& a, const Action& b, int num_stages) {
  if (a.microbatch != b.microbatch) return false;
  switch (a.kind) {
    case ActionKind::kF: return b.kind == ActionKind::kF && b.stage == a.stage - 1;
    case ActionKind::kW: return b.kind == ActionKind::kB && b.stage == a.stage;
    default:
      if (a.stage == num_stages - 1) return b.kind == ActionKind::kF && b.stage == a.stage;
      return (b.kind == ActionKind::kB || b.kind == ActionKind::kBW) && b.stage == a.stage + 1;
  }
}

// Actions on the critical path that waited for their worker rather than their data, as
// (worker, position), from the end of the longest span backwards.
std::vector<std::pair<int, size_t>> CriticalWaits(const Schedule& s,
                                                  const std::vector<std::vector<Action>>& orders,
                                                  const Timer& timer, int longest) {
  std::vector<std::pair<int, size_t>> out;
  // Where each (kind, stage, microbatch) runs, to follow data edges.
  const int m = s.num_microbatches;
  std::vector<std::pair<int, size_t>> at_f(static_cast<size_t>(s.num_stages) * m),
      at_b(at_f.size());
  for (int w = 0; w < s.num_workers; ++w) {
    for (size_t k = 0; k < orders[w].size(); ++k) {
      const Action& a = orders[w][k];
      const size_t cell = static_cast<size_t>(a.stage) * m + a.microbatch;
      if (a.kind == ActionKind::kF) at_f[cell] = {w, k};
      if (a.kind == ActionKind::kB || a.kind == ActionKind::kBW) at_b[cell] = {w, k};
    }
  }
  int w = longest;
  if (orders[w].empty()) return out;
  size_t k = orders[w].size() - 1;
  while (true) {
    const Action& a = orders[w][k];
    const double ready = timer.Ready(a);
    if (k > 0 && timer.End(w, k - 1) > ready + kEps) {
      out.emplace_back(w, k);
      --k;
      continue;
    }
    if (a.kind == ActionKind::kF && a.stage == 0) break;
    const size_t cell = static_cast<size_t>(a.stage) * m + a.microbatch;
    if (a.kind == ActionKind::kF) {
      std::tie(w, k) = at_f[cell - m];
    } else if (a.kind == ActionKind::kW) {
      std::tie(w, k) = at_b[cell];
    } else if (a.stage == s.num_stages - 1) {
      std::tie(w, k) = at_f[cell];
    } else {
      std::tie(w, k) = at_b[cell + m];
    }
  }
  return out;
}

}  // namespace

PolishResult PolishOrder(const Schedule& schedule, const CostModel& costs,
                         const PolishOptions& options) {
  PolishResult result{schedule, 0.0, 0, 0};
  int64_t per_run = 0;
  for (const auto& l : schedule.worker_actions) per_run += static_cast<int64_t>(l.size());
  Schedule current = schedule;
  std::vector<std::vector<Action>>& orders = current.worker_actions;
  Timer timer(current, costs);
  Timer::Result now = timer.Run(orders, options.memory_cap, 1e300);
  result.work += per_run;
  if (!now.ok) return result;
  timer.Keep();
  result.max_span = now.max_span;
  const int n = current.num_stages;
  auto spent = [&] { return result.work + per_run > options.work_budget; };
  auto better = [](const Timer::Result& a, const Timer::Result& b) {
    return a.ok && (a.max_span < b.max_span - kEps ||
                    (a.max_span < b.max_span + kEps && a.total_end < b.total_end - kEps));
  };
  auto rotate_to = [](std::vector<Action>& list, size_t a, size_t b) {  // list[a] to place b
    if (a > b) {
      std::rotate(list.begin() + b, list.begin() + a, list.begin() + a + 1);
    } else {
      std::rotate(list.begin() + a, list.begin() + a + 1, list.begin() + b + 1);
    }
  };
  // Whether list position k is within the options' edge of either end of a worker's list.
  auto near_end = [&](size_t k, size_t size) {
    const size_t e = static_cast<size_t>(options.edge);
    return options.edge <= 0 || k < e || k + e >= size;
  };
  // First-improvement descent over critical-path moves; `now` and the timer describe `orders`.
  auto descend = [&] {
    bool improved = true;
    while (improved && !spent()) {
      improved = false;
      const std::vector<std::pair<int, size_t>> waits =
          CriticalWaits(current, orders, timer, now.longest);
      for (const auto& [w, k] : waits) {
        std::vector<Action>& list = orders[w];
        if (!near_end(k, list.size())) continue;
        for (int dir = 0; dir < 2 && !improved; ++dir) {
          const size_t from = dir == 0 ? k : k - 1;
          for (int d = 1; d <= options.max_shift && !improved && !spent(); ++d) {
            size_t to;
            if (dir == 0) {
              if (static_cast<size_t>(d) > from) break;
              to = from - d;
              if (DependsOn(list[from], list[to], n)) break;
            } else {
              to = from + d;
              if (to >= list.size() || DependsOn(list[to], list[from], n)) break;
            }
            rotate_to(list, from, to);
            const Timer::Result r =
                timer.Run(orders, options.memory_cap, now.max_span, w, std::min(from, to));
            result.work += r.timed;
            if (better(r, now)) {
              timer.Keep();
              now = r;
              ++result.moves;
              improved = true;
            } else {
              rotate_to(list, to, from);
            }
          }
        }
        if (improved) break;
      }
    }
  };
  descend();
  Schedule best = current;
  Timer::Result best_r = now;
  // Iterated local search: kick the best order with a few random legal swaps, descend again,
  // keep the result if it is better. A fixed seed keeps the output deterministic.
  XorShift64 rng;
  // Kicks since the last improvement. An order whose longest span nothing shortened (neither the
  // first descent nor the first few kicks) is usually tight already (the unit-cost patterns):
  // it gets fewer.
  int stale = 0;
  const double input_span = result.max_span;
  bool ever = now.max_span < input_span - kEps;
  for (int round = 0; round < options.kicks && !spent(); ++round) {
    if (stale >= (ever ? options.stale_kicks : options.stale_kicks / 4)) break;
    ++stale;
    current = best;
    for (int s = 0; s < options.kick_swaps; ++s) {
      const int w = static_cast<int>(rng.Next() % current.num_workers);
      std::vector<Action>& list = orders[w];
      if (list.size() < 2) continue;
      // Kicks land where an order has room to change: the warm-up and the cool-down (a
      // repeated steady state is already tight).
      const size_t edge = options.edge > 0 ? std::min<size_t>(options.edge, list.size() - 1)
                                                : list.size() - 1;
      size_t k = rng.Next() % edge;
      if (rng.Next() & 1) k = list.size() - 2 - k;
      if (DependsOn(list[k + 1], list[k], n)) continue;
      std::swap(list[k], list[k + 1]);
    }
    now = timer.Run(orders, options.memory_cap, 1e300);
    result.work += per_run;
    if (!now.ok) continue;
    timer.Keep();
    descend();
    if (better(now, best_r)) {
      // Only a shorter longest span renews the kicks' patience; tie-break gains alone do not
      // (at unit costs they never end).
      if (now.max_span < best_r.max_span - kEps) stale = 0;
      best = current;
      best_r = now;
      ever = ever || best_r.max_span < input_span - kEps;
    }
  }
  result.schedule = std::move(best);
  result.max_span = best_r.max_span;
  return result;
}

}  // namespace pipetrain::schedule
