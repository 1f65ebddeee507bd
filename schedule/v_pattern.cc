#include "schedule/v_pattern.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <utility>

namespace pipetrain::schedule {
namespace {

constexpr int kEmpty = -1;

struct Slot {
  ActionKind kind = ActionKind::kF;
  int stage = 0;
  int mb = 0;
};

}  // namespace

namespace {

// The reordered variants work on per-worker slot lines (index = unit slot).
enum NodeType { kNone = -1, kF0, kF1, kBD, kBU, kW0, kW1, kNumTypes };
struct Node {
  int type = kNone;
  int mb = 0;
};
using Line = std::vector<Node>;

void PatternOffsets(bool min, int p, int i, int off[4]) {
  if (min) {
    const int d = p % 3 == 0 ? 2 : 0;
    off[0] = i, off[1] = 2 * p - 1 - i, off[2] = 2 * p + d + i, off[3] = 4 * p + d - 1 - i;
  } else {
    const int d = p % 2 == 0 ? 3 : 0;
    off[0] = 2 * i, off[1] = 3 * p - 2 - i, off[2] = 3 * p + d + 2 * i - 1,
    off[3] = 6 * p + d - 2 - i;
  }
}

// Empty slots after the first pass take pending W's (one FIFO, or one per chunk with chunk 0's
// first when `split`); leftovers go at the end.
void PutW(Line& line, bool split) {
  std::deque<Node> q0, q1;
  bool started = false;
  for (size_t t = 0; t < line.size(); ++t) {
    Node& x = line[t];
    if (x.type == kBU) (q0).push_back({kW0, x.mb});
    if (x.type == kBD) (split ? q1 : q0).push_back({kW1, x.mb});
    if (x.type != kNone) {
      started = true;
    } else if (started && (!q0.empty() || !q1.empty())) {
      std::deque<Node>& q = !q0.empty() ? q0 : q1;
      x = q.front();
      q.pop_front();
    }
  }
  for (std::deque<Node>* q : {&q0, &q1}) {
    for (const Node& x : *q) line.push_back(x);
  }
}

void StripW(Line& line) {
  for (Node& x : line) {
    if (x.type == kW0 || x.type == kW1) x = Node{};
  }
}

// Memory of a line whose W's are implicit (they would fill empty slots, one FIFO, as PutW):
// the state before each slot, so a changed suffix can be re-checked from where it changes.
struct ImplicitState {
  int mem = 0, pending = 0;
  bool started = false;
};
bool Same(const ImplicitState& a, const ImplicitState& b) {
  return a.mem == b.mem && a.pending == b.pending && a.started == b.started;
}
void Step(ImplicitState& st, const Node& x) {
  if (x.type == kF0 || x.type == kF1) ++st.mem;
  if (x.type == kBD || x.type == kBU) ++st.pending;
  if (x.type != kNone) {
    st.started = true;
  } else if (st.started && st.pending > 0) {
    --st.pending;
    --st.mem;
  }
}

// One reorder pass over all workers (see the header). implicit_w: the lines hold no W's and
// memory counts them where PutW would put them (the authors' second pass).
void Reorder(int p, int m, std::vector<Line>& lines, bool warmup_too, bool implicit_w) {
  auto at = [&](int w, int type, int mb) -> size_t {
    return (static_cast<size_t>(w) * kNumTypes + type) * m + mb;
  };
  std::vector<int> pos(static_cast<size_t>(p) * kNumTypes * m, -1);
  std::vector<std::vector<int>> prof(p);             // explicit W's: memory after each slot
  std::vector<std::vector<ImplicitState>> state(p);  // implicit W's: state before each slot
  // Re-derives the states from slot `from` on; past `changed_to` the old states are valid again
  // as soon as one matches (the suffix is unchanged).
  auto rebuild = [&](int w, size_t from, size_t changed_to) {
    ImplicitState st = state[w][from];
    for (size_t t = from; t < lines[w].size(); ++t) {
      if (t > changed_to && Same(state[w][t], st)) return;
      state[w][t] = st;
      Step(st, lines[w][t]);
    }
  };
  int target = 0;
  std::vector<std::pair<int, int>> order;  // (slot, worker)
  for (int w = 0; w < p; ++w) {
    if (!implicit_w) prof[w].assign(lines[w].size(), 0);
    int mem = 0;
    ImplicitState st;
    if (implicit_w) state[w].assign(lines[w].size() + 1, ImplicitState{});
    for (size_t t = 0; t < lines[w].size(); ++t) {
      const Node& x = lines[w][t];
      if (implicit_w) {
        state[w][t] = st;
        Step(st, x);
        mem = st.mem;
      } else {
        if (x.type == kF0 || x.type == kF1) ++mem;
        if (x.type == kW0 || x.type == kW1) --mem;
        prof[w][t] = mem;
      }
      target = std::max(target, mem);
      if (x.type != kNone) pos[at(w, x.type, x.mb)] = static_cast<int>(t);
    }
  }
  // Only the warm-up (phase 0) and cool-down (phase 2) move; the steady state (phase 1) stays.
  // Visited in (slot, worker) order, generated directly (sorting them cost more than the moves).
  const int first_bu = pos[at(0, kBU, 0)], last_f0 = pos[at(0, kF0, m - 1)];
  size_t longest = 0;
  for (const Line& l : lines) longest = std::max(longest, l.size());
  const int cool = std::max(last_f0 + 1, first_bu);
  for (int t = 0; t < static_cast<int>(longest); ++t) {
    if (t < first_bu ? !warmup_too : t < cool) continue;
    for (int w = 0; w < p; ++w) {
      if (t < static_cast<int>(lines[w].size()) && lines[w][t].type != kNone) {
        order.emplace_back(t, w);
      }
    }
  }
  for (const auto& entry : order) {
    // Plain variables, not structured bindings: the lambdas below capture them, which clang
    // (the fuzz build) does not allow for bindings before C++20's P1091.
    const int slot = entry.first, w = entry.second;
    const Node x = lines[w][slot];
    if (x.type == kNone) continue;
    int lo = 0;
    auto dep = [&](int dw, int type, int mb) {
      if (mb >= 0 && dw >= 0 && dw < p) lo = std::max(lo, pos[at(dw, type, mb)] + 1);
    };
    dep(w, x.type, x.mb - 1);
    switch (x.type) {
      case kF0: dep(w - 1, kF0, x.mb); break;
      case kF1: w < p - 1 ? dep(w + 1, kF1, x.mb) : dep(w, kF0, x.mb); break;
      case kBD: w > 0 ? dep(w - 1, kBD, x.mb) : dep(w, kF1, x.mb); break;
      case kBU: w < p - 1 ? dep(w + 1, kBU, x.mb) : dep(w, kBD, x.mb); break;
      case kW0: dep(w, kBU, x.mb); break;
      case kW1: dep(w, kBD, x.mb); break;
    }
    const int delta =
        (x.type == kF0 || x.type == kF1) ? 1 : ((x.type == kW0 || x.type == kW1) ? -1 : 0);
    // With explicit W's an F fits at t when the memory over [t, slot) stays below the target:
    // the last slot from which on it does (one backward scan) bounds the candidates.
    int explicit_from = lo;
    if (!implicit_w && delta > 0) {
      explicit_from = slot;
      while (explicit_from > lo && prof[w][explicit_from - 1] + 1 <= target) --explicit_from;
    }
    // Whether the pass fits at free slot t: the worker's memory stays within the target.
    auto fits = [&](int t) {
      if (!implicit_w) return t >= explicit_from;
      ImplicitState st = state[w][t];
      for (size_t j = t; j < lines[w].size(); ++j) {
        // Past the moved pass, once the state matches the current one the rest is unchanged
        // (and within the target already).
        if (static_cast<int>(j) > slot && Same(state[w][j], st)) break;
        Step(st, static_cast<int>(j) == t ? x : (static_cast<int>(j) == slot ? Node{} : lines[w][j]));
        if (st.mem > target) return false;
      }
      return true;
    };
    // The earliest free slot after the dependencies where the pass fits (not only the first
    // free one: the authors' pass keeps looking; at p = 16, m = 64, unit costs, V-Half ends at
    // 212.5 this way, 214.5 with the first free slot only).
    int t = lo;
    for (; t < slot; ++t) {
      if (lines[w][t].type == kNone && fits(t)) break;
    }
    if (t >= slot) continue;
    if (!implicit_w) {
      for (int j = t; j < slot; ++j) prof[w][j] += delta;
    }
    lines[w][t] = x;
    lines[w][slot] = Node{};
    pos[at(w, x.type, x.mb)] = t;
    if (implicit_w) rebuild(w, t, slot);
  }
}

Schedule Reordered(bool min, int p, int m, std::string name) {
  Schedule s = MakeEmptySchedule(std::move(name), p, m, VPlacement(p));
  std::vector<Line> lines(p);
  for (int i = 0; i < p; ++i) {
    int off[4];
    PatternOffsets(min, p, i, off);
    lines[i].assign(*std::max_element(off, off + 4) + 6 * m + 1, Node{});
    for (int k = 0; k < m; ++k) {
      for (int t = 0; t < 4; ++t) lines[i][off[t] + 6 * k] = Node{t, k};
    }
    PutW(lines[i], false);
  }
  Reorder(p, m, lines, /*warmup_too=*/true, /*implicit_w=*/false);
  for (Line& l : lines) StripW(l);
  Reorder(p, m, lines, /*warmup_too=*/false, /*implicit_w=*/true);
  for (int i = 0; i < p; ++i) {
    StripW(lines[i]);
    PutW(lines[i], true);
    auto& list = s.worker_actions[i];
    list.reserve(6 * static_cast<size_t>(m));
    const int down = i, up = 2 * p - 1 - i;
    for (const Node& x : lines[i]) {
      switch (x.type) {
        case kF0: list.push_back(Action{ActionKind::kF, down, x.mb}); break;
        case kF1: list.push_back(Action{ActionKind::kF, up, x.mb}); break;
        case kBD: list.push_back(Action{ActionKind::kB, up, x.mb}); break;
        case kBU: list.push_back(Action{ActionKind::kB, down, x.mb}); break;
        case kW0: list.push_back(Action{ActionKind::kW, down, x.mb}); break;
        case kW1: list.push_back(Action{ActionKind::kW, up, x.mb}); break;
        default: break;
      }
    }
  }
  return s;
}

}  // namespace

Schedule MakeVPattern(VPatternKind kind, int num_workers, int num_microbatches, std::string name) {
  const int p = num_workers, m = num_microbatches;
  if (kind == VPatternKind::kMinReordered || kind == VPatternKind::kHalfReordered) {
    return Reordered(kind == VPatternKind::kMinReordered, p, m, std::move(name));
  }
  Schedule s = MakeEmptySchedule(std::move(name), p, m, VPlacement(p));
  for (int i = 0; i < p; ++i) {
    int off[4];  // F chunk 0, F chunk 1, B chunk 1 (down), B chunk 0 (up)
    PatternOffsets(kind == VPatternKind::kMin, p, i, off);
    const int stage[4] = {i, 2 * p - 1 - i, 2 * p - 1 - i, i};
    const ActionKind kinds[4] = {ActionKind::kF, ActionKind::kF, ActionKind::kB, ActionKind::kB};
    const int len = *std::max_element(off, off + 4) + 6 * m + 1;
    std::vector<int> slot(len, kEmpty);  // index into `passes`
    std::vector<Slot> passes;
    passes.reserve(4 * m);
    for (int k = 0; k < m; ++k) {
      for (int t = 0; t < 4; ++t) {
        slot[off[t] + 6 * k] = static_cast<int>(passes.size());
        passes.push_back({kinds[t], stage[t], k});
      }
    }
    // put_w: each empty slot after a B takes the oldest pending W.
    auto& list = s.worker_actions[i];
    list.reserve(6 * m);
    std::deque<Slot> pending;
    bool started = false;
    for (int t = 0; t < len; ++t) {
      if (slot[t] != kEmpty) {
        const Slot& x = passes[slot[t]];
        list.push_back(Action{x.kind, x.stage, x.mb});
        if (x.kind == ActionKind::kB) pending.push_back({ActionKind::kW, x.stage, x.mb});
        started = true;
      } else if (started && !pending.empty()) {
        list.push_back(Action{ActionKind::kW, pending.front().stage, pending.front().mb});
        pending.pop_front();
      }
    }
    for (const Slot& x : pending) list.push_back(Action{ActionKind::kW, x.stage, x.mb});
  }
  return s;
}

VOrderPeaks PeaksOfVOrder(const Schedule& schedule, const CostModel& costs, double memory_cap) {
  VOrderPeaks r;
  const double mem_at = memory_cap + 1e-9;  // as EvaluateVOrder
  r.peak.assign(schedule.num_workers, 0.0);
  for (int w = 0; w < schedule.num_workers; ++w) {
    double mem = 0.0;
    for (const Action& a : schedule.worker_actions[w]) {
      const StageCost& c = costs.stages[a.stage];
      if (a.kind == ActionKind::kF) {
        mem += c.activation;
        r.peak[w] = std::max(r.peak[w], mem);
      } else if (a.kind == ActionKind::kB) {
        mem -= c.freed_by_b;
      } else {
        mem -= c.activation - c.freed_by_b;
      }
      if (mem > mem_at) r.within_cap = false;
    }
  }
  return r;
}

VOrderEval EvaluateVOrder(const Schedule& schedule, const CostModel& costs, double memory_cap,
                          double abort_span) {
  VOrderEval r;
  const int p = schedule.num_workers, m = schedule.num_microbatches, n = schedule.num_stages;
  const double kUnset = -1.0;
  auto idx = [m](int stage, int mb) { return static_cast<size_t>(stage) * m + mb; };
  std::vector<double> end_f(static_cast<size_t>(n) * m, kUnset), end_b(end_f);
  std::vector<size_t> head(p, 0);
  std::vector<double> clock(p, 0.0), first(p, std::numeric_limits<double>::infinity()), mem(p, 0.0);
  r.peak.assign(p, 0.0);
  const auto& where = schedule.stage_to_worker;
  auto comm = [&](int a, int b) { return where[a] == where[b] ? 0.0 : costs.comm; };
  std::vector<int> active;
  active.reserve(2 * p);
  for (int w = p - 1; w >= 0; --w) active.push_back(w);
  size_t done = 0, total = 0;
  for (const auto& l : schedule.worker_actions) total += l.size();
  const bool limited = abort_span < 1e299;
  std::vector<double> rem(p, 0.0);  // per worker: work not yet timed
  if (limited) {
    for (int w = 0; w < p; ++w) {
      for (const Action& a : schedule.worker_actions[w]) {
        const StageCost& c = costs.stages[a.stage];
        rem[w] += a.kind == ActionKind::kF ? c.f : (a.kind == ActionKind::kB ? c.b : c.w);
      }
    }
  }
  const double abort_at = abort_span + 1e-7 * (1.0 + std::abs(abort_span));
  const double mem_at = memory_cap + 1e-9;
  while (!active.empty()) {
    const int w = active.back();
    active.pop_back();
    const auto& list = schedule.worker_actions[w];
    while (head[w] < list.size()) {
      const Action& a = list[head[w]];
      const StageCost& c = costs.stages[a.stage];
      double ready = 0.0;
      if (a.kind == ActionKind::kF) {
        if (a.stage > 0) {
          const double e = end_f[idx(a.stage - 1, a.microbatch)];
          if (e < 0) break;
          ready = e + comm(a.stage - 1, a.stage);
        }
      } else if (a.kind == ActionKind::kB) {
        const bool last = a.stage == n - 1;
        const int prod = last ? a.stage : a.stage + 1;
        const double e = (last ? end_f : end_b)[idx(prod, a.microbatch)];
        if (e < 0) break;
        ready = e + comm(prod, a.stage);
      } else {
        ready = end_b[idx(a.stage, a.microbatch)];
        if (ready < 0) break;
      }
      const double start = std::max(clock[w], ready);
      double dur = c.w;
      if (a.kind == ActionKind::kF) {
        dur = c.f;
        mem[w] += c.activation;
        r.peak[w] = std::max(r.peak[w], mem[w]);
      } else if (a.kind == ActionKind::kB) {
        dur = c.b;
        mem[w] -= c.freed_by_b;
      } else {
        mem[w] -= c.activation - c.freed_by_b;
      }
      const double end = start + dur;
      if (mem[w] > mem_at) {
        r.pruned = true;
        return r;
      }
      if (limited) {
        rem[w] -= dur;
        if (end - std::min(first[w], start) + rem[w] > abort_at) {
          r.pruned = true;
          return r;
        }
      }
      if (a.kind == ActionKind::kF) {
        end_f[idx(a.stage, a.microbatch)] = end;
        if (a.stage + 1 < n) active.push_back(where[a.stage + 1]);
      } else if (a.kind == ActionKind::kB) {
        end_b[idx(a.stage, a.microbatch)] = end;
        if (a.stage > 0) active.push_back(where[a.stage - 1]);
      }
      first[w] = std::min(first[w], start);
      clock[w] = end;
      ++head[w];
      ++done;
    }
  }
  r.ok = done == total;
  for (int w = 0; w < p; ++w) {
    if (head[w] == 0) continue;
    r.max_span = std::max(r.max_span, clock[w] - first[w]);
    r.makespan = std::max(r.makespan, clock[w]);
  }
  return r;
}

}  // namespace pipetrain::schedule
