#include "coordinator/schedule/v_pattern.h"

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

Schedule MakeVPattern(VPatternKind kind, int num_workers, int num_microbatches, std::string name) {
  const int p = num_workers, m = num_microbatches;
  Schedule s = MakeEmptySchedule(std::move(name), p, m, VPlacement(p));
  for (int i = 0; i < p; ++i) {
    int off[4];  // F chunk 0, F chunk 1, B chunk 1 (down), B chunk 0 (up)
    if (kind == VPatternKind::kMin) {
      const int d = p % 3 == 0 ? 2 : 0;
      off[0] = i, off[1] = 2 * p - 1 - i, off[2] = 2 * p + d + i, off[3] = 4 * p + d - 1 - i;
    } else {
      const int d = p % 2 == 0 ? 3 : 0;
      off[0] = 2 * i, off[1] = 3 * p - 2 - i, off[2] = 3 * p + d + 2 * i - 1,
      off[3] = 6 * p + d - 2 - i;
    }
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
