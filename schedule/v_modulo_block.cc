#include "schedule/v_modulo_block.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/numeric/int128.h"
#include "schedule/v_block_search.h"

namespace pipetrain::schedule {
namespace {

// Occupancy of a period's slots (at most 128).
using Mask = absl::uint128;
constexpr int kMaxSlots = 128;

constexpr double kTol = 1e-9;
constexpr long kUnbounded = std::numeric_limits<long>::max() / 4;

// Relative layout of a worker: y, z, u after x = 0, and the two W's delays after their B's.
struct Layout {
  int y, z, u, da, db;
};

struct State {
  int x, y, z, u;
  long X, UU, ZD, YU;  // hop sums into this worker: chunk-0 F (down), chunk-0 B (up), ...
  int t0;              // worker 0's turn: chunk-1 F -> chunk-1 B
  long g_fixed;        // part of G fixed so far
  long g_max;          // largest G every worker so far allows
  int parent;
  int layout;
  long Slack() const { return g_max - g_fixed; }
};

class Search {
 public:
  Search(int p, const CostModel& costs, double cap, const ModuloBlockOptions& opt)
      : p_(p), costs_(costs), cap_(cap), opt_(opt) {
    const VChunkCosts c = LargestVChunkCosts(p, costs);
    const int slots = ModuloGridSlots(p, costs);
    q_ = c.work / slots;
    f_ = std::max(1, GridSlots(c.f, q_));
    b_ = std::max(1, GridSlots(c.b, q_));
    w_ = std::max(1, GridSlots(c.w, q_));
    c_ = GridSlots(c.comm, q_);
    k_ = std::max(slots, 2 * (f_ + b_ + w_)) + std::max(0, opt.extra_slots);
    full_ = k_ >= kMaxSlots ? ~Mask{0} : (Mask{1} << k_) - 1;
  }

  std::vector<BuildingBlock> Run() {
    if (k_ > kMaxSlots) return {};
    BuildLayouts();
    if (layouts_.empty()) return {};
    // The beam narrows so that one search costs at most max_steps transitions.
    const long per_state = static_cast<long>(layouts_.size()) * std::max(1, p_ - 1);
    beam_ =
        static_cast<int>(std::clamp<long>(opt_.max_steps / per_state, 4, std::max(4, opt_.beam)));
    // Where even the narrowest beam would pass max_transitions (many layouts, many workers),
    // each state tries every stride-th layout, from an offset that moves with the state and the
    // worker, so that the beam as a whole still tries them all.
    stride_ = static_cast<int>(
        std::max<long>(1, (beam_ * per_state + opt_.max_transitions - 1) / opt_.max_transitions));
    std::vector<std::vector<State>> level(p_);
    std::vector<State> next;
    for (int l = 0; l < static_cast<int>(layouts_.size()); ++l) {
      const Layout& lay = layouts_[l];
      State s{0, lay.y, lay.z, lay.u, 0, 0, 0, 0, Mod(lay.z - lay.y - f_), 0, kUnbounded, -1, l};
      s.g_fixed = 2 * f_ + b_ + s.t0;
      if (Admit(0, s)) next.push_back(s);
    }
    level[0] = Prune(next);
    const int hf = f_ + c_, hb = b_ + c_;
    auto hops_after = [&](int i) { return static_cast<long>(p_ - 1 - i) * (2 * hf + 2 * hb); };
    for (int i = 0; i + 1 < p_; ++i) {
      next.clear();
      for (int k = 0; k < static_cast<int>(level[i].size()); ++k) {
        const State& s = level[i][k];
        for (int l = (k + i) % stride_; l < static_cast<int>(layouts_.size()); l += stride_) {
          const Layout& lay = layouts_[l];
          // Waits of the four hops as functions of x's wait a: a, (c1 - a), (c2 + a), (c3 - a)
          // modulo the period; their sum is constant between the breakpoints below.
          const int c1 = s.y - s.x - 2 * hf - lay.y;
          const int c2 = s.x + hf + lay.z - s.z - hb;
          const int c3 = s.u - hb - s.x - hf - lay.u;
          // Only the least total: G grows by it, and the cheapest shift leaves the most slack.
          int a = -1, least = 0;
          for (int start : {0, Wrap(c1) + 1, Wrap(c3) + 1, Wrap(-c2)}) {
            if (start >= k_) continue;
            const int total = start + Wrap(c1 - start) + Wrap(c2 + start) + Wrap(c3 - start);
            if (a < 0 || total < least) a = start, least = total;
          }
          if (s.Slack() - (2 * hf + 2 * hb + least) < hops_after(i + 1)) continue;
          {
            const int cy = Wrap(c1 - a), bz = Wrap(c2 + a), du = Wrap(c3 - a);
            State t;
            t.x = Wrap(s.x + hf + a);
            t.y = Wrap(t.x + lay.y);
            t.z = Wrap(t.x + lay.z);
            t.u = Wrap(t.x + lay.u);
            t.X = s.X + hf + a;
            t.YU = s.YU + hf + cy;
            t.ZD = s.ZD + hb + bz;
            t.UU = s.UU + hb + du;
            t.t0 = s.t0;
            t.g_fixed = s.g_fixed + 2 * hf + 2 * hb + a + cy + bz + du;
            t.g_max = s.g_max;
            t.parent = k;
            t.layout = l;
            if (Admit(i + 1, t)) next.push_back(t);
          }
        }
      }
      level[i + 1] = Prune(next);
      if (level[i + 1].empty()) return {};
    }
    // The tip's turns close the chain: G = fixed part + both turns.
    std::vector<std::pair<long, int>> ends;
    const std::vector<State>& last = level[p_ - 1];
    for (int k = 0; k < static_cast<int>(last.size()); ++k) {
      const State& e = last[k];
      const long g = e.g_fixed + Mod(e.y - e.x - f_) + Mod(e.u - e.z - b_);
      if (g <= e.g_max) ends.emplace_back(g, k);
    }
    std::sort(ends.begin(), ends.end());
    std::vector<BuildingBlock> out;
    for (const auto& [g, k] : ends) {
      if (static_cast<int>(out.size()) >= opt_.max_results) break;
      out.push_back(Build(level, k));
    }
    return out;
  }

 private:
  int Mod(long a) const {
    const long r = a % k_;
    return static_cast<int>(r < 0 ? r + k_ : r);
  }
  // Mod for the hot loop's small arguments (a few periods either side of 0): no division.
  int Wrap(int a) const {
    while (a < 0) a += k_;
    while (a >= k_) a -= k_;
    return a;
  }

  Mask Arc(int start, int len) const {
    const Mask ones = len >= kMaxSlots ? ~Mask{0} : (Mask{1} << len) - 1;
    const int s = Mod(start);
    return ((ones << s) | (s == 0 ? 0 : ones >> (k_ - s))) & full_;
  }

  // Every relative layout where F, F, B, B do not overlap and both W's find room (each at the
  // first free room after its B; either W placed first). The arcs of each length are tabled by
  // start: this runs once per search over period^3 candidates.
  void BuildLayouts() {
    std::vector<Mask> af(k_), ab(k_), aw(k_);
    for (int t = 0; t < k_; ++t) af[t] = Arc(t, f_), ab[t] = Arc(t, b_), aw[t] = Arc(t, w_);
    const Mask ox = af[0];
    for (int y = 0; y < k_; ++y) {
      if (ox & af[y]) continue;
      const Mask oy = ox | af[y];
      for (int z = 0; z < k_; ++z) {
        if (oy & ab[z]) continue;
        const Mask oz = oy | ab[z];
        for (int u = 0; u < k_; ++u) {
          if (oz & ab[u]) continue;
          const Mask occ = oz | ab[u];
          int seen_da = -1, seen_db = -1;
          for (bool a_first : {false, true}) {
            Mask o = occ;
            int da = -1, db = -1;
            for (int pass = 0; pass < 2; ++pass) {
              const bool is_a = (pass == 0) == a_first;
              const int from = Wrap((is_a ? u : z) + b_);
              int d = 0;
              while (d < k_ && (o & aw[Wrap(from + d)])) ++d;
              if (d == k_) break;
              o |= aw[Wrap(from + d)];
              (is_a ? da : db) = d;
            }
            if (da < 0 || db < 0 || (da == seen_da && db == seen_db)) continue;
            seen_da = da, seen_db = db;
            layouts_.push_back({y, z, u, da, db});
          }
        }
      }
    }
  }

  // Worker i with state s: checks its periodic peak and tightens G_max. False when its chunk-1
  // lifespan alone breaks the cap or the hops still to come no longer fit.
  bool Admit(int i, State& s) const {
    const Layout& lay = layouts_[s.layout];
    const double a0 = costs_.stages[i].activation;
    const double a1 = costs_.stages[2 * p_ - 1 - i].activation;
    const long lb = f_ + s.t0 + s.ZD + s.YU + b_ + lay.db + w_;
    const int r = Wrap(s.u + b_ + lay.da + w_ - s.x);
    // Chunk 0's lifespan is r + n*period; at the two F starts t (the peak's candidates) chunk 0
    // holds n + [r > d_t] copies, chunk 1 ceil((lb - d'_t) / period).
    long n_max = kUnbounded / k_;
    for (int t : {s.x, s.y}) {
      const int d0 = Wrap(t - s.x), d1 = Wrap(t - s.y);
      const long held1 = lb > d1 ? (lb - d1 + k_ - 1) / k_ : 0;
      const double room = cap_ - a1 * held1;
      if (room < -kTol) return false;
      if (a0 > kTol) {
        n_max = std::min(n_max, static_cast<long>(std::floor(room / a0 + 1e-9)) - (r > d0 ? 1 : 0));
      }
    }
    if (n_max < 0) return false;
    const long la_max = r + n_max * k_;
    const long k_i = s.UU + s.X - b_ - lay.da - w_;
    s.g_max = std::min(s.g_max, la_max >= kUnbounded / 2 ? kUnbounded : la_max + k_i);
    const long hops_left = static_cast<long>(p_ - 1 - i) * (2 * (f_ + c_) + 2 * (b_ + c_));
    return s.Slack() >= hops_left;
  }

  // One state per phase tuple (least G so far, then most slack); half the beam by least G, half
  // by most slack.
  std::vector<State> Prune(const std::vector<State>& all) const {
    auto key = [&](const State& s) {
      return ((int64_t{s.x} * kMaxSlots + s.y) * kMaxSlots + s.z) * kMaxSlots + s.u;
    };
    absl::flat_hash_map<int64_t, int> best;
    best.reserve(all.size());
    std::vector<State> unique;
    unique.reserve(all.size());
    for (const State& s : all) {
      auto [it, inserted] = best.try_emplace(key(s), static_cast<int>(unique.size()));
      if (inserted) {
        unique.push_back(s);
        continue;
      }
      State& held = unique[it->second];
      if (s.g_fixed < held.g_fixed || (s.g_fixed == held.g_fixed && s.g_max > held.g_max)) held = s;
    }
    const int beam = beam_;
    if (static_cast<int>(unique.size()) <= beam) return unique;
    const auto half = unique.begin() + beam / 2;
    std::nth_element(unique.begin(), half, unique.end(), [](const State& a, const State& b) {
      return a.g_fixed != b.g_fixed ? a.g_fixed < b.g_fixed : a.Slack() > b.Slack();
    });
    std::nth_element(half, unique.begin() + beam, unique.end(),
                     [](const State& a, const State& b) { return a.Slack() > b.Slack(); });
    unique.resize(beam);
    return unique;
  }

  BuildingBlock Build(const std::vector<std::vector<State>>& level, int end) const {
    const int n = 2 * p_;
    std::vector<const State*> path(p_);
    for (int i = p_ - 1, k = end; i >= 0; --i) {
      path[i] = &level[i][k];
      k = level[i][k].parent;
    }
    const State& tip = *path[p_ - 1];
    std::vector<long> f(n), b(n), w(n);
    for (int i = 0; i < p_; ++i) f[i] = path[i]->X;
    f[p_] = tip.X + f_ + Mod(tip.y - tip.x - f_);
    const long y0 = f[p_] + tip.YU;
    const long z0 = y0 + f_ + path[0]->t0;
    const long u0 = z0 + tip.ZD + b_ + Mod(tip.u - tip.z - b_) + tip.UU;
    for (int i = 0; i < p_; ++i) {
      const Layout& lay = layouts_[path[i]->layout];
      f[n - 1 - i] = y0 - path[i]->YU;
      b[n - 1 - i] = z0 + path[i]->ZD;
      b[i] = u0 - path[i]->UU;
      w[i] = b[i] + b_ + lay.da;
      w[n - 1 - i] = b[n - 1 - i] + b_ + lay.db;
    }
    return VBlockFromSlots(p_, costs_, f, b, w, q_, k_);
  }

  const int p_;
  const CostModel& costs_;
  const double cap_;
  const ModuloBlockOptions& opt_;
  double q_ = 1.0;
  int f_ = 1, b_ = 1, w_ = 1, c_ = 0, k_ = 6;
  int beam_ = 4;
  int stride_ = 1;
  Mask full_ = 0;
  std::vector<Layout> layouts_;
};

}  // namespace

int ModuloGridSlots(int num_workers, const CostModel& costs) {
  const VChunkCosts c = LargestVChunkCosts(num_workers, costs);
  // The smallest grid of >= 20 slots (a slot of period is then <= 5% of it) on which every
  // cost is a whole number of slots; else the least rounding error among a few.
  for (int k = 20; k <= 60; ++k) {
    const double q = c.work / k;
    bool exact = true;
    for (double x : {c.f, c.b, c.w, c.comm}) {
      exact &= std::abs(x / q - std::round(x / q)) < 1e-6;
    }
    if (exact) return k;
  }
  int best = 24;
  double best_err = 1e300;
  for (int k : {20, 24, 30, 32, 40, 48}) {
    const double q = c.work / k;
    double err = 0.0;
    for (double x : {c.f, c.b, c.w, c.comm}) err += x > kTol ? GridSlots(x, q) * q - x : 0.0;
    if (err < best_err - 1e-9) best = k, best_err = err;
  }
  return best;
}

std::vector<BuildingBlock> ModuloVBlocks(int num_workers, const CostModel& costs, double cap,
                                         const ModuloBlockOptions& options) {
  if (num_workers < 2 || static_cast<int>(costs.stages.size()) != 2 * num_workers) return {};
  Search search(num_workers, costs, cap, options);
  return search.Run();
}

}  // namespace pipetrain::schedule
