#include "schedule/v_block_search.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <tuple>

namespace pipetrain::schedule {
namespace {

constexpr double kTol = 1e-9;

// A partial block: phases of worker i's four chain passes and how it was reached.
struct Node {
  int x = 0, y = 0, z = 0, u = 0;  // F chunk 0, F chunk 1, B chunk 1, B chunk 0 (slot mod k)
  int cost = 0;
  int parent = -1;
  std::array<int, 4> wait = {0, 0, 0, 0};  // hop waits into this worker (x, y, z, u order)
};

class Search {
 public:
  Search(int p, const CostModel& costs, const VBlockSearchOptions& opt) : p_(p), costs_(costs), opt_(opt) {
    const VChunkCosts c = LargestVChunkCosts(p, costs);
    q_ = c.work / std::clamp(opt.slots, 1, 32);
    f_ = std::max(1, GridSlots(c.f, q_));
    b_ = std::max(1, GridSlots(c.b, q_));
    w_ = std::max(1, GridSlots(c.w, q_));
    c_ = GridSlots(c.comm, q_);
    k_ = std::max(std::clamp(opt.slots, 1, 32), 2 * (f_ + b_ + w_)) + std::clamp(opt.extra_slots, 0, 8);
    // A period must fit a 64-bit set; very uneven per-stage costs can exceed it (Run: no blocks).
    full_ = k_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << k_) - 1;
  }

  std::vector<BuildingBlock> Run() {
    if (k_ > 64) return {};
    std::vector<std::vector<Node>> level(p_);
    // Worker 0: F chunk 0 at phase 0 (a rotation of the whole block), the rest free; the turn
    // from its chunk-1 F to its chunk-1 B (same worker) waits t0 slots.
    for (int y = 0; y < k_; ++y) {
      for (int t0 = 0; t0 <= k_ / 2; ++t0) {  // a longer turn costs more than it can save
        const int z = Mod(y + f_ + t0);
        for (int u = 0; u < k_; ++u) {
          int d1 = 0, d0 = 0;
          if (!Fits(0, y, z, u, &d1, &d0)) continue;
          Node n;
          n.y = y, n.z = z, n.u = u;
          n.cost = 2 * t0 + opt_.w_weight * (d1 + d0);
          level[0].push_back(n);
        }
      }
    }
    Prune(level[0]);
    const int hop_f = f_ + c_, hop_b = b_ + c_;
    for (int i = 0; i + 1 < p_; ++i) {
      std::vector<Node> next;
      for (int k = 0; k < static_cast<int>(level[i].size()); ++k) {
        const Node& s = level[i][k];
        for (int a = 0; a <= opt_.max_wait; ++a) {
          const int x = Mod(s.x + hop_f + a);
          for (int bz = 0; bz <= opt_.max_wait; ++bz) {
            const int z = Mod(s.z + hop_b + bz);
            for (int cy = 0; cy <= opt_.max_wait; ++cy) {
              const int y = Mod(s.y - hop_f - cy);
              for (int du = 0; du <= opt_.max_wait; ++du) {
                const int u = Mod(s.u - hop_b - du);
                int d1 = 0, d0 = 0;
                if (!Fits(x, y, z, u, &d1, &d0)) continue;
                Node n;
                n.x = x, n.y = y, n.z = z, n.u = u;
                // Waits of the chunk-1 waves near worker 0 lengthen both lifespans of the workers
                // beyond them; those of the chunk-0 waves one.
                n.cost = s.cost + a + 2 * bz + 2 * cy + du + opt_.w_weight * (d1 + d0);
                n.parent = k;
                n.wait = {a, cy, bz, du};
                next.push_back(n);
              }
            }
          }
        }
      }
      // One node per phase tuple (the cheapest).
      std::sort(next.begin(), next.end(), [](const Node& a, const Node& b) {
        return std::tie(a.x, a.y, a.z, a.u, a.cost) < std::tie(b.x, b.y, b.z, b.u, b.cost);
      });
      std::vector<Node> unique;
      for (const Node& n : next) {
        if (unique.empty() || std::tie(unique.back().x, unique.back().y, unique.back().z,
                                       unique.back().u) != std::tie(n.x, n.y, n.z, n.u)) {
          unique.push_back(n);
        }
      }
      Prune(unique);
      level[i + 1] = std::move(unique);
      if (level[i + 1].empty()) return {};
    }
    // Complete: add the tip's turns (chunk-0 F -> chunk-1 F, chunk-1 B -> chunk-0 B).
    std::vector<std::pair<int, int>> ends;  // (total cost, index)
    const std::vector<Node>& last = level[p_ - 1];
    for (int k = 0; k < static_cast<int>(last.size()); ++k) {
      const Node& e = last[k];
      ends.emplace_back(e.cost + Mod(e.y - e.x - f_) + Mod(e.u - e.z - b_), k);
    }
    std::sort(ends.begin(), ends.end());
    std::vector<BuildingBlock> out;
    for (const auto& [total, k] : ends) {
      if (static_cast<int>(out.size()) >= opt_.max_results) break;
      out.push_back(Build(level, k));
    }
    return out;
  }

 private:
  int Mod(int a) const { return ((a % k_) + k_) % k_; }

  void Prune(std::vector<Node>& v) const {
    std::stable_sort(v.begin(), v.end(), [](const Node& a, const Node& b) { return a.cost < b.cost; });
    if (static_cast<int>(v.size()) > opt_.beam) v.resize(opt_.beam);
  }

  // The four passes do not overlap modulo the period and both W's find room: W of chunk 1 first
  // (its B runs first on the chain), each at the first free room after its B. d1/d0: W delays.
  // Occupancy is a bit set over the period's slots (k_ <= 64, see the constructor).
  uint64_t Arc(int start, int len) const {
    const uint64_t ones = len >= 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1;
    const int s = Mod(start);
    uint64_t m = (ones << s) | (s == 0 ? 0 : ones >> (k_ - s));
    return m & full_;
  }
  bool Fits(int x, int y, int z, int u, int* d1, int* d0) const {
    uint64_t occ = 0;
    for (const auto& [s, len] : {std::pair{x, f_}, std::pair{y, f_}, std::pair{z, b_}, std::pair{u, b_}}) {
      const uint64_t a = Arc(s, len);
      if (occ & a) return false;
      occ |= a;
    }
    auto room = [&](int from) {
      for (int o = 0; o < k_; ++o) {
        if (!(occ & Arc(from + o, w_))) return o;
      }
      return -1;
    };
    *d1 = room(z + b_);
    if (*d1 < 0) return false;
    occ |= Arc(z + b_ + *d1, w_);
    *d0 = room(u + b_);
    return *d0 >= 0;
  }

  BuildingBlock Build(const std::vector<std::vector<Node>>& level, int end) {
    const int n = 2 * p_;
    std::vector<const Node*> path(p_);
    for (int i = p_ - 1, k = end; i >= 0; --i) {
      path[i] = &level[i][k];
      k = level[i][k].parent;
    }
    // Absolute slot times along the microbatch's chain.
    std::vector<long> f(n), b(n), w(n);
    f[0] = 0;
    for (int i = 0; i + 1 < p_; ++i) f[i + 1] = f[i] + f_ + c_ + path[i + 1]->wait[0];
    f[p_] = f[p_ - 1] + f_ + Mod(path[p_ - 1]->y - path[p_ - 1]->x - f_);
    for (int i = p_ - 1; i >= 1; --i) {
      const int s = n - 1 - i;
      f[s + 1] = f[s] + f_ + c_ + path[i]->wait[1];
    }
    b[n - 1] = f[n - 1] + f_ + Mod(path[0]->z - path[0]->y - f_);
    for (int i = 0; i + 1 < p_; ++i) {
      const int s = n - 1 - i;
      b[s - 1] = b[s] + b_ + c_ + path[i + 1]->wait[2];
    }
    b[p_ - 1] = b[p_] + b_ + Mod(path[p_ - 1]->u - path[p_ - 1]->z - b_);
    for (int i = p_ - 1; i >= 1; --i) b[i - 1] = b[i] + b_ + c_ + path[i]->wait[3];
    for (int i = 0; i < p_; ++i) {
      int d1 = 0, d0 = 0;
      Fits(Mod(f[i]), Mod(f[n - 1 - i]), Mod(b[n - 1 - i]), Mod(b[i]), &d1, &d0);
      w[n - 1 - i] = b[n - 1 - i] + b_ + d1;
      w[i] = b[i] + b_ + d0;
    }
    return VBlockFromSlots(p_, costs_, f, b, w, q_, k_);
  }

  const int p_;
  const CostModel& costs_;
  const VBlockSearchOptions& opt_;
  double q_ = 1.0;
  int f_ = 1, b_ = 1, w_ = 1, c_ = 0, k_ = 6;
  uint64_t full_ = 0;
};

}  // namespace

VChunkCosts LargestVChunkCosts(int num_workers, const CostModel& costs) {
  VChunkCosts c;
  c.comm = costs.comm;
  for (const StageCost& s : costs.stages) {
    c.f = std::max(c.f, s.f);
    c.b = std::max(c.b, s.b);
    c.w = std::max(c.w, s.w);
  }
  for (int i = 0; i < num_workers; ++i) {
    const StageCost& x = costs.stages[i];
    const StageCost& y = costs.stages[2 * num_workers - 1 - i];
    c.work = std::max(c.work, x.f + x.b + x.w + y.f + y.b + y.w);
  }
  return c;
}

BuildingBlock VBlockFromSlots(int num_workers, const CostModel& costs, const std::vector<long>& f,
                              const std::vector<long>& b, const std::vector<long>& w, double q,
                              int period_slots) {
  const int n = 2 * num_workers;
  BuildingBlock block;
  block.num_workers = num_workers;
  block.stage_to_worker = VPlacement(num_workers);
  block.interval = period_slots * q;
  block.passes.resize(3 * n);
  for (int s = 0; s < n; ++s) {
    const StageCost& c = costs.stages[s];
    block.passes[3 * s] = {ActionKind::kF, s, f[s] * q, c.f, s};
    block.passes[3 * s + 1] = {ActionKind::kB, s, b[s] * q, c.b, n + (n - 1 - s)};
    block.passes[3 * s + 2] = {ActionKind::kW, s, w[s] * q, c.w, 2 * n + (n - 1 - s)};
  }
  return block;
}

int GridSlots(double x, double q) {
  return x <= kTol ? 0 : static_cast<int>(std::ceil(x / q - 1e-6));
}

std::vector<BuildingBlock> SearchVBlocks(int num_workers, const CostModel& costs,
                                         const VBlockSearchOptions& options) {
  if (num_workers < 2 || static_cast<int>(costs.stages.size()) != 2 * num_workers) return {};
  Search search(num_workers, costs, options);
  return search.Run();
}

int ChooseVBlockSlots(int num_workers, const CostModel& costs) {
  const VChunkCosts c = LargestVChunkCosts(num_workers, costs);
  int best = 24;
  double best_err = 1e300;
  for (int k : {6, 8, 10, 12, 16, 20, 24}) {
    const double q = c.work / k;
    double err = 0.0;
    for (double x : {c.f, c.b, c.w, c.comm}) {
      if (x > kTol) err += GridSlots(x, q) * q - x;
    }
    err /= c.work;
    if (err < best_err - 1e-6) {
      best = k;
      best_err = err;
    }
  }
  return best;
}

}  // namespace pipetrain::schedule
