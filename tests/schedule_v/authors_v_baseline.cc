#include "tests/schedule_v/authors_v_baseline.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <tuple>

namespace pipetrain::schedule::testing {
namespace {

// Node types: F of chunk 0, F of chunk 1, B of chunk 1 ("down"), B of chunk 0 ("up"), and the
// W's of chunk 0 and chunk 1.
enum Type { kF0 = 0, kF1 = 1, kB1 = 2, kB0 = 3, kW0 = 4, kW1 = 5 };
constexpr int kTypes = 6;

class Builder {
 public:
  Builder(AuthorsVKind kind, int p, int m) : p_(p), m_(m), slot_(kTypes * p * m, -1) {
    grid_.assign(p, std::vector<int>());
    for (int i = 0; i < p; ++i) {
      std::array<int, 4> offset;
      if (kind == AuthorsVKind::kMin) {
        const int d = p % 3 == 0 ? 2 : 0;
        offset = {i, 2 * p - 1 - i, 2 * p + d + i, 4 * p + d - 1 - i};
      } else {
        const int d = p % 2 == 0 ? 3 : 0;
        offset = {2 * i, 3 * p - 2 - i, 3 * p + d + 2 * i - 1, 6 * p + d - 2 - i};
      }
      for (int k = 0; k < m; ++k) {
        for (int t = 0; t < 4; ++t) Place(t, i, k, offset[t] + 6 * k);
      }
    }
  }

  void PutW(bool split) {
    for (int i = 0; i < p_; ++i) {
      std::array<std::deque<int>, 2> queue;  // per chunk when split, else all in queue[0]
      const int end = static_cast<int>(grid_[i].size());
      for (int s = 0; s < end || !queue[0].empty() || !queue[1].empty(); ++s) {
        const int id = s < end ? grid_[i][s] : -1;
        if (id >= 0) {
          const int type = TypeOf(id);
          if (type == kB0 || type == kB1) {
            const int w = Id(type == kB0 ? kW0 : kW1, i, MbOf(id));
            queue[split && type == kB1 ? 1 : 0].push_back(w);
          }
          continue;
        }
        std::deque<int>& q = !queue[0].empty() ? queue[0] : queue[1];
        if (q.empty()) continue;
        const int w = q.front();
        q.pop_front();
        Place(TypeOf(w), i, MbOf(w), s);
      }
    }
  }

  void StripW() {
    for (int i = 0; i < p_; ++i) {
      for (int& id : grid_[i]) {
        if (id >= 0 && TypeOf(id) >= kW0) {
          slot_[id] = -1;
          id = -1;
        }
      }
    }
  }

  void Reorder(bool consider_w) {
    int target = 0;
    for (int i = 0; i < p_; ++i) target = std::max(target, Peak(i));
    int first_b0 = std::numeric_limits<int>::max(), last_f0 = -1;
    for (int k = 0; k < m_; ++k) {
      first_b0 = std::min(first_b0, slot_[Id(kB0, 0, k)]);
      last_f0 = std::max(last_f0, slot_[Id(kF0, 0, k)]);
    }
    std::vector<std::tuple<int, int, int>> visit;  // (slot, stage, node)
    for (int i = 0; i < p_; ++i) {
      for (int s = 0; s < static_cast<int>(grid_[i].size()); ++s) {
        if (grid_[i][s] >= 0) visit.emplace_back(s, i, grid_[i][s]);
      }
    }
    std::sort(visit.begin(), visit.end());
    for (const auto& [at, i, id] : visit) {
      const int phase = at < first_b0 ? 0 : at <= last_f0 ? 1 : 2;
      if (phase == 1 || (phase == 0 && !consider_w)) continue;
      const int cur = slot_[id];
      int earliest = 0;
      for (int dep : Deps(id)) {
        if (dep >= 0 && slot_[dep] >= 0) earliest = std::max(earliest, slot_[dep] + 1);
      }
      for (int s = earliest; s < cur; ++s) {
        if (grid_[i][s] >= 0) continue;
        grid_[i][cur] = -1;
        grid_[i][s] = id;
        slot_[id] = s;
        if (Peak(i) <= target) break;
        grid_[i][s] = -1;
        grid_[i][cur] = id;
        slot_[id] = cur;
      }
    }
  }

  AuthorsVPlan Time(double f, double b, double w, double comm) const {
    AuthorsVPlan plan;
    std::vector<std::vector<int>> lists(p_);
    for (int i = 0; i < p_; ++i) {
      for (int id : grid_[i]) {
        if (id >= 0) lists[i].push_back(id);
      }
    }
    std::vector<double> end(slot_.size(), -1.0);
    std::vector<size_t> next(p_, 0);
    std::vector<double> free(p_, 0.0), first(p_, -1.0);
    const std::array<double, kTypes> cost = {f, f, b, b, w, w};
    for (bool progress = true; progress;) {
      progress = false;
      for (int i = 0; i < p_; ++i) {
        while (next[i] < lists[i].size()) {
          const int id = lists[i][next[i]];
          const auto [dep, cross] = DataDep(id);
          if (dep >= 0 && end[dep] < 0) break;
          const double ready = dep < 0 ? 0.0 : end[dep] + (cross ? comm : 0.0);
          const double start = std::max(free[i], ready);
          if (first[i] < 0) first[i] = start;
          end[id] = start + cost[TypeOf(id)];
          free[i] = end[id];
          ++next[i];
          progress = true;
        }
      }
    }
    double lo = std::numeric_limits<double>::max(), hi = 0;
    for (int i = 0; i < p_; ++i) {
      plan.max_span = std::max(plan.max_span, free[i] - first[i]);
      lo = std::min(lo, first[i]);
      hi = std::max(hi, free[i]);
    }
    plan.makespan = hi - lo;
    const double work = m_ * 2 * (f + b + w);
    plan.bubble = plan.max_span > 0 ? 1.0 - work / plan.max_span : 0.0;
    int peak = 0;
    for (int i = 0; i < p_; ++i) {
      int mem = 0;
      for (int id : lists[i]) {
        const int type = TypeOf(id);
        mem += type <= kF1 ? 1 : type >= kW0 ? -1 : 0;
        peak = std::max(peak, mem);
      }
    }
    plan.peak_units = peak / 2.0;
    plan.order.resize(p_);
    for (int i = 0; i < p_; ++i) {
      for (int id : lists[i]) {
        const int type = TypeOf(id), mb = MbOf(id);
        const int chunk0 = i, chunk1 = 2 * p_ - 1 - i;
        switch (type) {
          case kF0: plan.order[i].push_back({ActionKind::kF, chunk0, mb}); break;
          case kF1: plan.order[i].push_back({ActionKind::kF, chunk1, mb}); break;
          case kB1: plan.order[i].push_back({ActionKind::kB, chunk1, mb}); break;
          case kB0: plan.order[i].push_back({ActionKind::kB, chunk0, mb}); break;
          case kW0: plan.order[i].push_back({ActionKind::kW, chunk0, mb}); break;
          default: plan.order[i].push_back({ActionKind::kW, chunk1, mb}); break;
        }
      }
    }
    return plan;
  }

 private:
  int Id(int type, int stage, int mb) const { return (type * p_ + stage) * m_ + mb; }
  int TypeOf(int id) const { return id / (p_ * m_); }
  int StageOf(int id) const { return id / m_ % p_; }
  int MbOf(int id) const { return id % m_; }

  void Place(int type, int stage, int mb, int s) {
    std::vector<int>& row = grid_[stage];
    if (static_cast<int>(row.size()) <= s) row.resize(s + 1, -1);
    row[s] = Id(type, stage, mb);
    slot_[Id(type, stage, mb)] = s;
  }

  // The reorder's dependencies (slot order): cross-stage input, the same-stage chain, the
  // previous microbatch's node of the same type; a W after its B.
  std::array<int, 3> Deps(int id) const {
    const int type = TypeOf(id), i = StageOf(id), k = MbOf(id);
    const int prev = k > 0 ? Id(type, i, k - 1) : -1;
    switch (type) {
      case kF0: return {i > 0 ? Id(kF0, i - 1, k) : -1, -1, prev};
      case kF1: return {i + 1 < p_ ? Id(kF1, i + 1, k) : -1, Id(kF0, i, k), prev};
      case kB1: return {i > 0 ? Id(kB1, i - 1, k) : -1, Id(kF1, i, k), prev};
      case kB0: return {i + 1 < p_ ? Id(kB0, i + 1, k) : -1, Id(kB1, i, k), prev};
      case kW0: return {Id(kB0, i, k), -1, prev};
      default: return {Id(kB1, i, k), -1, prev};
    }
  }

  // The data dependency for timing, and whether it crosses workers (pays the transfer).
  std::pair<int, bool> DataDep(int id) const {
    const int type = TypeOf(id), i = StageOf(id), k = MbOf(id);
    switch (type) {
      case kF0: return {i > 0 ? Id(kF0, i - 1, k) : -1, true};
      case kF1: return i + 1 < p_ ? std::pair{Id(kF1, i + 1, k), true} : std::pair{Id(kF0, i, k), false};
      case kB1: return i > 0 ? std::pair{Id(kB1, i - 1, k), true} : std::pair{Id(kF1, i, k), false};
      case kB0: return i + 1 < p_ ? std::pair{Id(kB0, i + 1, k), true} : std::pair{Id(kB1, i, k), false};
      case kW0: return {Id(kB0, i, k), false};
      default: return {Id(kB1, i, k), false};
    }
  }

  // Stage i's peak in chunk units: F +1, W -1; with no W placed, every free slot frees the
  // oldest W still owed by an earlier B.
  int Peak(int i) const {
    bool placed_w = false;
    for (int id : grid_[i]) placed_w |= id >= 0 && TypeOf(id) >= kW0;
    int mem = 0, peak = 0, owed = 0;
    for (int id : grid_[i]) {
      if (id < 0) {
        if (!placed_w && owed > 0) --owed, --mem;
        continue;
      }
      const int type = TypeOf(id);
      if (type <= kF1) ++mem;
      if (type >= kW0) --mem;
      if (!placed_w && (type == kB0 || type == kB1)) ++owed;
      peak = std::max(peak, mem);
    }
    return peak;
  }

  int p_, m_;
  std::vector<std::vector<int>> grid_;  // per stage, per slot: node id or -1
  std::vector<int> slot_;               // per node id: its slot, -1 if not placed
};

}  // namespace

AuthorsVPlan AuthorsVSchedule(AuthorsVKind kind, int p, int m, double f, double b, double w,
                              double comm) {
  Builder builder(kind, p, m);
  builder.PutW(/*split=*/false);
  builder.Reorder(/*consider_w=*/true);
  builder.StripW();
  builder.Reorder(/*consider_w=*/false);
  builder.StripW();
  builder.PutW(/*split=*/true);
  return builder.Time(f, b, w, comm);
}

}  // namespace pipetrain::schedule::testing
