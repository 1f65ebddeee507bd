#include "schedule/building_block.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

namespace pipetrain::schedule {
namespace {

int KindSlot(ActionKind kind) {
  switch (kind) {
    case ActionKind::kF:
      return 0;
    case ActionKind::kB:
      return 1;
    default:
      return 2;
  }
}

// ceil that forgives floating-point noise: 2.0000000001 intervals count as 2.
double TolerantCeil(double x) { return std::ceil(x - 1e-9); }

}  // namespace

const BlockPass& BuildingBlock::Pass(ActionKind kind, int stage) const {
  return passes[3 * stage + KindSlot(kind)];
}

namespace {

// The busy arcs of one worker on a circle of length `period`: the block repeats every period,
// so two passes of one worker must not overlap modulo it.
class ModularTimeline {
 public:
  explicit ModularTimeline(double period) : period_(period) {}

  // Earliest t >= t0 where [t, t + d) is free modulo the period; < 0 when there is none.
  double Earliest(double t0, double d) const {
    if (d <= kTol) return t0;
    std::vector<double> starts = {t0};
    for (const auto& [a, len] : arcs_) {
      const double e = a + len;
      const double k = std::ceil((t0 - e) / period_ - 1e-12);
      starts.push_back(e + std::max(0.0, k) * period_);
    }
    std::sort(starts.begin(), starts.end());
    for (double t : starts) {
      if (t + kTol >= t0 && Free(t, d)) return std::max(t, t0);
    }
    return -1.0;
  }
  void Add(double t, double d) {
    if (d > kTol) arcs_.emplace_back(std::fmod(t, period_), d);
  }

 private:
  static constexpr double kTol = 1e-9;
  bool Free(double t, double d) const {
    if (d > period_ + kTol) return false;
    for (const auto& [a, len] : arcs_) {
      double y = std::fmod(std::fmod(t - a, period_) + period_, period_);
      if (y > period_ - kTol) y = 0.0;
      if (y < len - kTol || y + d > period_ + kTol) return false;
    }
    return true;
  }
  double period_;
  std::vector<std::pair<double, double>> arcs_;  // (start mod period, length)
};

// Places one microbatch's chain with each pass at the earliest time that respects its
// dependency, the shape's extra gap, and no overlap modulo `period` on its worker.
bool PlaceVBlock(int p, const CostModel& costs, const VBlockShape& shape, double period,
                 BuildingBlock& block) {
  const int num_stages = 2 * p;
  std::vector<ModularTimeline> lines(p, ModularTimeline(period));
  auto comm = [&](int a, int b) {
    return block.stage_to_worker[a] == block.stage_to_worker[b] ? 0.0 : costs.comm;
  };
  auto place = [&](int stage, double ready, double d) {
    ModularTimeline& line = lines[block.stage_to_worker[stage]];
    const double t = line.Earliest(ready, d);
    if (t >= 0) line.Add(t, d);
    return t;
  };
  double t = 0.0;
  for (int s = 0; s < num_stages; ++s) {
    const StageCost& c = costs.stages[s];
    const double start = place(s, t, c.f);
    if (start < 0) return false;
    block.passes[3 * s] = {ActionKind::kF, s, start, c.f, s};
    t = start + c.f;
    if (s + 1 < num_stages && s != p - 1) {
      t += comm(s, s + 1) + (s < p ? shape.f0_gap : shape.f1_gap) * c.f;
    }
  }
  for (int s = num_stages - 1; s >= 0; --s) {
    const StageCost& c = costs.stages[s];
    const double start = place(s, t, c.b);
    if (start < 0) return false;
    block.passes[3 * s + 1] = {ActionKind::kB, s, start, c.b, num_stages + (num_stages - 1 - s)};
    t = start + c.b;
    if (s > 0 && s != p) t += comm(s, s - 1) + (s >= p ? shape.b1_gap : shape.b0_gap) * c.b;
  }
  // W's last: they fill what F and B left free, in the order their B's ran.
  for (int s = num_stages - 1; s >= 0; --s) {
    const StageCost& c = costs.stages[s];
    const BlockPass& b = block.passes[3 * s + 1];
    const double start = place(s, b.offset + b.duration + shape.w_delay * c.w, c.w);
    if (start < 0) return false;
    block.passes[3 * s + 2] = {ActionKind::kW, s, start, c.w,
                               2 * num_stages + (num_stages - 1 - s)};
  }
  return true;
}

}  // namespace

BuildingBlock MakeVBlock(int num_workers, const CostModel& costs, const VBlockShape& shape) {
  const int p = num_workers;
  BuildingBlock block;
  block.num_workers = p;
  block.stage_to_worker = VPlacement(p);
  block.passes.resize(3 * 2 * p);
  std::vector<double> work(p, 0.0);
  for (int s = 0; s < 2 * p; ++s) {
    const StageCost& c = costs.stages[s];
    work[block.stage_to_worker[s]] += c.f + c.b + c.w;
  }
  const double busiest = *std::max_element(work.begin(), work.end());
  // The tightest period that tiles; fragments left by F and B may force a slightly longer one.
  for (int step = 0; step <= 40; ++step) {
    block.interval = busiest * (1.0 + shape.period_stretch + 0.025 * step);
    if (PlaceVBlock(p, costs, shape, block.interval, block)) return block;
  }
  // Unreachable for sane costs (at 2x the work every pass fits); keep the block well-formed.
  block.interval = 0.0;
  for (const StageCost& c : costs.stages) block.interval += c.f + c.b + c.w;
  PlaceVBlock(p, costs, shape, block.interval, block);
  return block;
}

std::vector<double> Lifespans(const BuildingBlock& block) {
  std::vector<double> out(block.NumStages());
  for (int s = 0; s < block.NumStages(); ++s) {
    const BlockPass& w = block.Pass(ActionKind::kW, s);
    out[s] = w.offset + w.duration - block.Pass(ActionKind::kF, s).offset;
  }
  return out;
}

std::vector<double> LifespanPeakBound(const BuildingBlock& block, const CostModel& costs) {
  std::vector<double> bound(block.num_workers, 0.0);
  const std::vector<double> life = Lifespans(block);
  for (int s = 0; s < block.NumStages(); ++s) {
    const double copies = block.interval > 0 ? TolerantCeil(life[s] / block.interval) : 1.0;
    bound[block.stage_to_worker[s]] += std::max(1.0, copies) * costs.stages[s].activation;
  }
  return bound;
}

Schedule RepeatBlock(const BuildingBlock& block, int num_microbatches, std::string name) {
  Schedule schedule = MakeEmptySchedule(std::move(name), block.num_workers, num_microbatches,
                                        block.stage_to_worker);
  // (nominal, chain, microbatch, pass index): a total order consistent with every dependency,
  // because a consumer's offset is >= its producer's and its chain position is larger.
  using Key = std::tuple<double, int, int, int>;
  if (block.interval > 0) {
    // Each pass's keys rise with the microbatch, so a worker's order is a merge of its passes'
    // sequences (same keys, same order as sorting them all; O(actions x passes per worker)).
    std::vector<std::vector<int>> mine(block.num_workers);
    for (int i = 0; i < static_cast<int>(block.passes.size()); ++i) {
      mine[block.stage_to_worker[block.passes[i].stage]].push_back(i);
    }
    // Each pass's current key is kept and only the picked one is recomputed (the merge runs
    // over every action of every candidate block in the V generators' screening).
    std::vector<int> next, queue;
    std::vector<Key> current;
    for (int w = 0; w < block.num_workers; ++w) {
      const std::vector<int>& ids = mine[w];
      auto key = [&](int k) {
        const BlockPass& pass = block.passes[ids[k]];
        return Key(pass.offset + next[k] * block.interval, pass.chain, next[k], ids[k]);
      };
      const int n_ids = static_cast<int>(ids.size());
      next.assign(n_ids, 0);
      current.clear();
      for (int k = 0; k < n_ids; ++k) current.push_back(key(k));
      auto& list = schedule.worker_actions[w];
      list.reserve(ids.size() * num_microbatches);
      if (num_microbatches < 1) continue;
      // The passes by current key (keys are distinct: the pass index is part of them): the
      // front is the next action, and a pass's new key, larger than its last, moves it back
      // past the keys below it.
      queue.resize(n_ids);
      for (int k = 0; k < n_ids; ++k) queue[k] = k;
      std::sort(queue.begin(), queue.end(), [&](int a, int b) { return current[a] < current[b]; });
      int live = n_ids;
      while (live > 0) {
        const int pick = queue[0];
        const BlockPass& pass = block.passes[ids[pick]];
        list.push_back(Action{pass.kind, pass.stage, next[pick]++});
        if (next[pick] >= num_microbatches) {
          std::copy(queue.begin() + 1, queue.begin() + live, queue.begin());
          --live;
          continue;
        }
        current[pick] = key(pick);
        int at = 0;
        while (at + 1 < live && current[queue[at + 1]] < current[pick]) {
          queue[at] = queue[at + 1];
          ++at;
        }
        queue[at] = pick;
      }
    }
    return schedule;
  }
  std::vector<std::vector<Key>> keys(block.num_workers);
  for (auto& k : keys) k.reserve(3 * 2 * num_microbatches);
  for (int i = 0; i < static_cast<int>(block.passes.size()); ++i) {
    const BlockPass& pass = block.passes[i];
    const int worker = block.stage_to_worker[pass.stage];
    for (int mb = 0; mb < num_microbatches; ++mb) {
      keys[worker].emplace_back(pass.offset + mb * block.interval, pass.chain, mb, i);
    }
  }
  for (int w = 0; w < block.num_workers; ++w) {
    std::sort(keys[w].begin(), keys[w].end());
    auto& list = schedule.worker_actions[w];
    list.reserve(keys[w].size());
    for (const Key& key : keys[w]) {
      const BlockPass& pass = block.passes[std::get<3>(key)];
      list.push_back(Action{pass.kind, pass.stage, std::get<2>(key)});
    }
  }
  return schedule;
}

}  // namespace pipetrain::schedule
