#include "schedule/cyclic_order.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "schedule/tolerance.h"
#include "schedule/xorshift.h"

namespace pipetrain::schedule {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int KindIndex(ActionKind kind) {
  switch (kind) {
    case ActionKind::kF: return 0;
    case ActionKind::kB: return 1;
    case ActionKind::kW: return 2;
    default: return -1;
  }
}

double Duration(const CostModel& costs, ActionKind kind, int stage) {
  const StageCost& c = costs.stages[stage];
  return kind == ActionKind::kF ? c.f : kind == ActionKind::kB ? c.b : c.w;
}

// The longest-path test of one loaded order at a given period. Potentials persist between tests
// (any start converges within |passes| rounds when no positive cycle exists), so a test after a
// small change usually settles in a few rounds.
class PeriodTester {
 public:
  PeriodTester(const Schedule& shape, const CostModel& costs, int k)
      : costs_(costs), k_(k), n_(shape.num_stages) {
    const int v = 3 * n_ * k_;
    potential_.assign(v, 0.0);
    parent_.assign(v, -1);
    colour_.assign(v, 0);
    seen_.assign(v, 0);
    auto comm = [&](int a, int b) {
      return shape.stage_to_worker[a] == shape.stage_to_worker[b] ? 0.0 : costs.comm;
    };
    for (int j = 0; j < k_; ++j) {  // chain order: relaxing in this order settles chains fast
      for (int s = 0; s + 1 < n_; ++s) {
        edges_.push_back({Id(0, s, j), Id(0, s + 1, j), costs.stages[s].f + comm(s, s + 1), 0});
      }
      edges_.push_back({Id(0, n_ - 1, j), Id(1, n_ - 1, j), costs.stages[n_ - 1].f, 0});
      for (int s = n_ - 1; s > 0; --s) {
        edges_.push_back({Id(1, s, j), Id(1, s - 1, j), costs.stages[s].b + comm(s, s - 1), 0});
      }
      for (int s = 0; s < n_; ++s) {
        edges_.push_back({Id(1, s, j), Id(2, s, j), costs.stages[s].b, 0});
      }
    }
    data_edges_ = edges_.size();
  }

  int Id(int kind, int stage, int slot) const { return (slot * 3 + kind) * n_ + stage; }

  // Loads the order's worker edges; false unless it holds every pass of K microbatches once.
  bool Load(const CyclicOrder& order) {
    edges_.resize(data_edges_);
    std::fill(seen_.begin(), seen_.end(), 0);
    busiest_ = 0.0;
    for (const std::vector<CyclicPass>& list : order.workers) {
      double work = 0.0;
      for (size_t i = 0; i < list.size(); ++i) {
        const CyclicPass& a = list[i];
        const CyclicPass& b = list[(i + 1) % list.size()];
        const int ka = KindIndex(a.kind), kb = KindIndex(b.kind);
        if (ka < 0 || kb < 0 || a.slot < 0 || a.slot >= k_) return false;
        const int id = Id(ka, a.stage, a.slot);
        if (seen_[id]++ > 0) return false;
        const int wrap = i + 1 == list.size() ? 1 : 0;
        const double d = Duration(costs_, a.kind, a.stage);
        work += d;
        edges_.push_back({id, Id(kb, b.stage, b.slot), d, b.lap - a.lap + wrap});
      }
      busiest_ = std::max(busiest_, work);
    }
    for (char c : seen_) {
      if (c != 1) return false;
    }
    return true;
  }

  // Whether the loaded order repeats every `period`. A cycle among the edges that last raised
  // each potential has positive weight (the Bellman-Ford lemma, whatever the start), so an
  // order that does not fit is usually caught within a few rounds instead of |passes|.
  bool Fits(double period) {
    const size_t v = potential_.size();
    std::fill(parent_.begin(), parent_.end(), -1);
    for (size_t round = 0; round <= v; ++round) {
      bool changed = false;
      for (const Edge& e : edges_) {
        const double x = potential_[e.from] + e.d - e.laps * period;
        if (x > potential_[e.to] + kEps) {
          potential_[e.to] = x;
          parent_[e.to] = e.from;
          changed = true;
        }
      }
      work_ += static_cast<int64_t>(edges_.size());
      if (!changed) {
        const double low = *std::min_element(potential_.begin(), potential_.end());
        for (double& x : potential_) x -= low;  // keep the numbers small
        return true;
      }
      if (HasParentCycle()) break;
    }
    std::fill(potential_.begin(), potential_.end(), 0.0);
    return false;
  }

  // The least period of the loaded order, bisected below `fits` (a period it runs at).
  double Least(double fits) {
    double lo = busiest_;  // every worker's own cycle bounds the period
    if (Fits(lo)) return lo;
    double hi = fits;
    while (hi - lo > 1e-7 * (1.0 + hi)) {
      const double mid = 0.5 * (lo + hi);
      (Fits(mid) ? hi : lo) = mid;
    }
    Fits(hi);  // leave a fitting period's potentials: the next test starts from them
    return hi;
  }

  // The least period, or +inf when the order deadlocks (no period fits).
  double Period() {
    double hi = std::max(busiest_, kEps) * 2;
    while (!Fits(hi)) {
      if (hi > busiest_ * 256) return kInf;
      hi *= 2;
    }
    return Least(hi);
  }

  int64_t work() const { return work_; }
  double Busiest() const { return busiest_; }

 private:
  bool HasParentCycle() {
    // Colour walk: 0 unvisited, 1 on the current walk, 2 done.
    std::fill(colour_.begin(), colour_.end(), 0);
    for (size_t s = 0; s < parent_.size(); ++s) {
      int x = static_cast<int>(s);
      while (x >= 0 && colour_[x] == 0) {
        colour_[x] = 1;
        x = parent_[x];
      }
      if (x >= 0 && colour_[x] == 1) return true;
      for (x = static_cast<int>(s); x >= 0 && colour_[x] == 1; x = parent_[x]) colour_[x] = 2;
    }
    work_ += static_cast<int64_t>(parent_.size());
    return false;
  }

  struct Edge {
    int from, to;
    double d;
    int laps;
  };
  const CostModel& costs_;
  const int k_, n_;
  std::vector<Edge> edges_;  // the data edges, then the loaded order's worker edges
  size_t data_edges_ = 0;
  std::vector<double> potential_;
  std::vector<int> parent_;    // the node whose edge last raised each potential (this test)
  std::vector<char> colour_;   // HasParentCycle's marks
  std::vector<char> seen_;
  double busiest_ = 0.0;
  int64_t work_ = 0;
};

double MaxPeak(const CyclicOrder& order, const Schedule& shape, const CostModel& costs) {
  double worst = 0.0;
  for (double x : CyclicPeaks(order, shape, costs)) worst = std::max(worst, x);
  return worst;
}

}  // namespace

std::optional<CyclicOrder> SteadyWindow(const Schedule& schedule, int microbatches) {
  const int k = microbatches;
  if (k < 1 || schedule.num_microbatches < 1) return std::nullopt;
  CyclicOrder out;
  out.microbatches = k;
  std::vector<int> stages_on(schedule.num_workers, 0);
  for (int w : schedule.stage_to_worker) ++stages_on[w];
  for (int w = 0; w < schedule.num_workers; ++w) {
    const std::vector<Action>& list = schedule.worker_actions[w];
    const size_t len = static_cast<size_t>(3 * stages_on[w] * k);
    if (list.size() < len) return std::nullopt;
    const size_t first = (list.size() - len) / 2;
    std::vector<CyclicPass> window;
    std::vector<char> seen(static_cast<size_t>(3 * schedule.num_stages * k), 0);
    for (size_t i = first; i < first + len; ++i) {
      const Action& a = list[i];
      const int kind = KindIndex(a.kind);
      if (kind < 0) return std::nullopt;
      const size_t id = (static_cast<size_t>(a.microbatch % k) * 3 + kind) * schedule.num_stages +
                        a.stage;
      if (seen[id]++ > 0) return std::nullopt;
      window.push_back({a.kind, a.stage, a.microbatch % k, a.microbatch / k});
    }
    out.workers.push_back(std::move(window));
  }
  return out;
}

Schedule Unroll(const CyclicOrder& order, const Schedule& shape, int num_microbatches) {
  Schedule s = MakeEmptySchedule(shape.name, shape.num_workers, num_microbatches,
                                 shape.stage_to_worker);
  const int k = order.microbatches;
  for (size_t w = 0; w < order.workers.size(); ++w) {
    const std::vector<CyclicPass>& list = order.workers[w];
    if (list.empty()) continue;
    int low = list[0].lap, high = list[0].lap;
    for (const CyclicPass& a : list) {
      low = std::min(low, a.lap);
      high = std::max(high, a.lap);
    }
    // Repetition r holds microbatches k*(lap + r) + slot: r from -high to the last lap needed.
    for (int r = -high - 1; r <= num_microbatches / k - low + 1; ++r) {
      for (const CyclicPass& a : list) {
        const int64_t mb = static_cast<int64_t>(k) * (a.lap + r) + a.slot;
        if (mb >= 0 && mb < num_microbatches) {
          s.worker_actions[w].push_back({a.kind, a.stage, static_cast<int>(mb)});
        }
      }
    }
  }
  return s;
}

double CyclicPeriod(const CyclicOrder& order, const Schedule& shape, const CostModel& costs) {
  PeriodTester tester(shape, costs, order.microbatches);
  if (!tester.Load(order)) return kInf;
  return tester.Period();
}

std::vector<double> CyclicPeaks(const CyclicOrder& order, const Schedule& shape,
                                const CostModel& costs) {
  const int k = order.microbatches;
  std::vector<int> lap(static_cast<size_t>(3 * shape.num_stages * k), 0);
  auto id = [&](int kind, int stage, int slot) { return (slot * 3 + kind) * shape.num_stages + stage; };
  std::vector<double> peaks;
  for (const std::vector<CyclicPass>& list : order.workers) {
    for (const CyclicPass& a : list) lap[id(KindIndex(a.kind), a.stage, a.slot)] = a.lap;
    // Held at the cycle's start: instances whose F ran in an earlier repetition and whose B
    // (whole activation) or W (what B left) has not run yet.
    double level = 0.0;
    for (const CyclicPass& a : list) {
      if (a.kind != ActionKind::kF) continue;
      const StageCost& c = costs.stages[a.stage];
      const int f = lap[id(0, a.stage, a.slot)], b = lap[id(1, a.stage, a.slot)],
                w = lap[id(2, a.stage, a.slot)];
      level += (f - b) * c.activation + (b - w) * (c.activation - c.freed_by_b);
    }
    double peak = level;
    for (const CyclicPass& a : list) {
      const StageCost& c = costs.stages[a.stage];
      if (a.kind == ActionKind::kF) {
        level += c.activation;
        peak = std::max(peak, level);
      } else if (a.kind == ActionKind::kB) {
        level -= c.freed_by_b;
      } else {
        level -= c.activation - c.freed_by_b;
      }
    }
    peaks.push_back(peak);
  }
  return peaks;
}

CyclicSearchResult ShortenPeriod(const CyclicOrder& start, const Schedule& shape,
                                 const CostModel& costs, const CyclicSearchOptions& options) {
  CyclicSearchResult result{start, kInf, kInf, 0};
  PeriodTester tester(shape, costs, start.microbatches);
  const double cap = options.memory_cap + 1e-9;
  if (!tester.Load(start) || MaxPeak(start, shape, costs) > cap) return result;
  double current_period = tester.Period();
  result.start_period = result.period = current_period;
  // At the busiest worker's work per period nothing is left to shorten.
  if (current_period == kInf || current_period <= tester.Busiest() * (1 + 1e-9)) return result;
  CyclicOrder current = start;
  XorShift64 rng;
  const int workers = static_cast<int>(current.workers.size());
  if (workers == 0) return result;
  for (int it = 0; it < options.iterations && tester.work() < options.work_budget; ++it) {
    CyclicOrder candidate = current;
    const uint64_t r = rng.Next() % 5;
    const int moves = r < 3 ? 1 : r == 3 ? 2 : 3;
    for (int i = 0; i < moves; ++i) {
      std::vector<CyclicPass>& list = candidate.workers[rng.Next() % workers];
      const size_t len = list.size();
      if (len < 2) continue;
      const size_t k = rng.Next() % len;
      if (rng.Next() % 4 == 0) {
        list[k].lap += (rng.Next() & 1) ? 1 : -1;  // this pass one repetition earlier or later
      } else if (k + 1 == len) {
        // Swap across the cycle's end: the last pass becomes the next repetition's first.
        CyclicPass last = list.back(), first = list.front();
        last.lap -= 1;
        first.lap += 1;
        list.front() = last;
        list.back() = first;
      } else {
        std::swap(list[k], list[k + 1]);
      }
    }
    if (MaxPeak(candidate, shape, costs) > cap) continue;
    // Accept when the candidate runs at the current period plus a slack that cools to zero.
    const double temperature =
        options.temperature * result.start_period * (1.0 - static_cast<double>(it) / options.iterations);
    const double limit = current_period - temperature * std::log(1.0 - rng.Uniform());
    if (!tester.Load(candidate) || !tester.Fits(limit)) continue;
    current_period = tester.Least(limit);
    current = std::move(candidate);
    if (current_period < result.period - kEps) {
      result.period = current_period;
      result.order = current;
    }
  }
  result.work = tester.work();
  return result;
}

}  // namespace pipetrain::schedule
