#include "schedule/v_modulo_block.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/numeric/int128.h"
#include "schedule/v_block_search.h"

namespace pipetrain::schedule {
namespace {

// Occupancy of a period's slots (at most 128): the compiler's own 128-bit integer where there
// is one (absl::uint128's operators cost several times as much in BuildLayouts' loops).
#ifdef __SIZEOF_INT128__
using Mask = unsigned __int128;
#else
using Mask = absl::uint128;
#endif
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
    unbounded_n_ = kUnbounded / k_;
    // Wrap's table: the hot loop's arguments are sums of a few phases (< k) and hops (f, b, w
    // and comm slots), so a few periods plus a few hops either side of 0 cover them.
    const long reach = 6L * k_ + 8L * (f_ + b_ + w_ + c_);
    if (k_ <= kMaxSlots && reach <= (1L << 20)) {
      wrap_lo_ = static_cast<int>(-reach);
      wrap_.resize(static_cast<size_t>(2 * reach));
      for (long a = -reach; a < reach; ++a) wrap_[a + reach] = static_cast<uint8_t>(Mod(a));
    }
    // Admit's tables: chunk 1 of a worker holds at most about 2p periods' worth of copies.
    if (k_ <= kMaxSlots) {
      held_tab_ = 2 * p_ + 16;
      periods_.resize(static_cast<size_t>(held_tab_) * k_);
      for (size_t v = 0; v < periods_.size(); ++v) periods_[v] = static_cast<long>(v) / k_;
      most_.resize(static_cast<size_t>(p_) * held_tab_);
      for (int i = 0; i < p_; ++i) {
        const double a0 = costs_.stages[i].activation;
        const double a1 = costs_.stages[2 * p_ - 1 - i].activation;
        for (long h = 0; h < held_tab_; ++h) {
          most_[static_cast<size_t>(i) * held_tab_ + h] = ComputeMostChunk0(h, a0, a1);
        }
      }
    }
  }

  std::vector<BuildingBlock> Run() {
    if (k_ > kMaxSlots || !ChainCanFit()) return {};
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
    group_stamp_.assign(num_groups_, -1);
    group_head_.assign(num_groups_, -1);
    BeginLevel(0);
    for (int l = 0; l < static_cast<int>(layouts_.size()); ++l) {
      const Layout& lay = layouts_[l];
      State s{0, lay.y, lay.z, lay.u, 0, 0, 0, 0, Mod(lay.z - lay.y - f_), 0, kUnbounded, -1, l};
      s.g_fixed = 2 * f_ + b_ + s.t0;
      if (Admit(0, s)) Offer(s);
    }
    Prune(&level[0]);
    const int hf = f_ + c_, hb = b_ + c_;
    auto hops_after = [&](int i) { return static_cast<long>(p_ - 1 - i) * (2 * hf + 2 * hb); };
    for (int i = 0; i + 1 < p_; ++i) {
      BeginLevel(i + 1);
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
          // (Wrap of each c once; the shifted waits then follow by one comparison each.)
          const int w1 = Wrap(c1), w2 = Wrap(c2), w3 = Wrap(c3);
          int a = -1, least = 0;
          for (int start : {0, w1 + 1, w3 + 1, w2 == 0 ? 0 : k_ - w2}) {
            if (start >= k_) continue;
            const int total = start + Down(w1, start) + Up(w2, start) + Down(w3, start);
            if (a < 0 || total < least) a = start, least = total;
          }
          if (s.Slack() - (2 * hf + 2 * hb + least) < hops_after(i + 1)) continue;
          {
            const int cy = Down(w1, a), bz = Up(w2, a), du = Down(w3, a);
            State t;
            t.x = Wrap(s.x + hf + a);
            t.y = Up(t.x, lay.y);
            t.z = Up(t.x, lay.z);
            t.u = Up(t.x, lay.u);
            t.X = s.X + hf + a;
            t.YU = s.YU + hf + cy;
            t.ZD = s.ZD + hb + bz;
            t.UU = s.UU + hb + du;
            t.t0 = s.t0;
            t.g_fixed = s.g_fixed + 2 * hf + 2 * hb + a + cy + bz + du;
            t.g_max = s.g_max;
            t.parent = k;
            t.layout = l;
            if (Admit(i + 1, t)) Offer(t);
          }
        }
      }
      Prune(&level[i + 1]);
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
  // Mod for the hot loop's small arguments (a few periods either side of 0): a table look-up
  // (k <= 128 fits a byte), Mod past the table.
  int Wrap(int a) const {
    const size_t at = static_cast<size_t>(static_cast<long>(a) - wrap_lo_);
    return at < wrap_.size() ? wrap_[at] : Mod(a);
  }
  // v / k for v >= 0: tabled for the small values Admit divides (no division in the hot loop).
  long Periods(long v) const {
    return v < static_cast<long>(periods_.size()) ? periods_[v] : v / k_;
  }
  // Admit's bound for worker i when chunk 1 holds `held1` copies: floor(room / a0 + 1e-9) of
  // the room chunk 1 leaves (kNoRoom when there is none, kAnyCount when a0 is 0), tabled per
  // worker for small counts (the same expressions, so the same values).
  static constexpr long kNoRoom = std::numeric_limits<long>::min();
  static constexpr long kAnyCount = std::numeric_limits<long>::max();
  long ComputeMostChunk0(long held1, double a0, double a1) const {
    const double room = cap_ - a1 * held1;
    if (room < -kTol) return kNoRoom;
    return a0 > kTol ? Floor(room / a0 + 1e-9) : kAnyCount;
  }
  long MostChunk0(int i, long held1, double a0, double a1) const {
    return held1 < held_tab_ ? most_[static_cast<size_t>(i) * held_tab_ + held1]
                             : ComputeMostChunk0(held1, a0, a1);
  }
  // (a - b) and (a + b) mod the period for phases a, b in [0, period).
  int Down(int a, int b) const { return a >= b ? a - b : a - b + k_; }
  int Up(int a, int b) const { return a + b < k_ ? a + b : a + b - k_; }
  // std::floor for the finite values Admit divides out (far inside long's range), inline.
  static long Floor(double x) {
    const long t = static_cast<long>(x);
    return static_cast<double>(t) > x ? t - 1 : t;
  }

  // False when no first state can pass Admit(0, .), whatever its layout: then the search finds
  // nothing, and its most costly part, the layouts (period^3 candidates), is not built. Worker 0
  // holds at most n <= N0 = floor(cap / a0) chunk-0 copies (chunk 1 only leaves less room), so
  // its lifespan is at most r + N0 * period with r < period, and G = lifespan + K_0 with K_0 =
  // -b - da - w <= -b - w; a first state fixes G >= 2f + b of it and needs the hops of the other
  // p - 1 workers on top. (p = 64, V-Min's cap with 1:1.5:0.5 and comm 0.2: every period up to
  // +50% fails this; five searches that built up to 94k layouts each to find nothing.)
  bool ChainCanFit() const {
    const double a0 = costs_.stages[0].activation;
    const double a1 = costs_.stages[2 * p_ - 1].activation;
    const long most = ComputeMostChunk0(0, a0, a1);
    if (most == kNoRoom) return false;
    if (most == kAnyCount || most >= unbounded_n_ / 2) return true;
    const long g_max = (most + 1) * k_ - 1 - b_ - w_;
    const long hops = static_cast<long>(p_ - 1) * (2 * (f_ + c_) + 2 * (b_ + c_));
    return g_max - (2 * f_ + b_) >= hops;
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
            const bool same = !layouts_.empty() && layouts_.back().y == y &&
                              layouts_.back().z == z && layouts_.back().u == u;
            if (!same) ++num_groups_;
            layouts_.push_back({y, z, u, da, db});
            group_.push_back(num_groups_ - 1);
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
    long n_max = unbounded_n_;
    for (int t : {s.x, s.y}) {
      const int d0 = Down(t, s.x), d1 = Down(t, s.y);
      const long held1 = lb > d1 ? Periods(lb - d1 + k_ - 1) : 0;
      const long most = MostChunk0(i, held1, a0, a1);
      if (most == kNoRoom) return false;
      if (most != kAnyCount) n_max = std::min(n_max, most - (r > d0 ? 1 : 0));
    }
    if (n_max < 0) return false;
    const long la_max = r + n_max * k_;
    const long k_i = s.UU + s.X - b_ - lay.da - w_;
    s.g_max = std::min(s.g_max, la_max >= kUnbounded / 2 ? kUnbounded : la_max + k_i);
    const long hops_left = static_cast<long>(p_ - 1 - i) * (2 * (f_ + c_) + 2 * (b_ + c_));
    return s.Slack() >= hops_left;
  }

  // The states offered for one worker, one per phase tuple (x, y, z, u): a later offer with
  // less G so far (then more slack) replaces the held one in place, so `unique_` keeps the order
  // of first offers. The tuple is x and the layout's (y, z, u) (group_): offers of a group are
  // chained, and a chain is a few states long, so no hashing is needed.
  void BeginLevel(int i) {
    level_stamp_ = i;
    unique_.clear();
    chain_.clear();
  }
  void Offer(const State& s) {
    const int g = group_[s.layout];
    if (group_stamp_[g] != level_stamp_) {
      group_stamp_[g] = level_stamp_;
      group_head_[g] = -1;
    }
    for (int k = group_head_[g]; k >= 0; k = chain_[k]) {
      State& held = unique_[k];
      if (held.x != s.x) continue;
      if (s.g_fixed < held.g_fixed || (s.g_fixed == held.g_fixed && s.g_max > held.g_max)) held = s;
      return;
    }
    chain_.push_back(group_head_[g]);
    group_head_[g] = static_cast<int>(unique_.size());
    unique_.push_back(s);
  }

  // The beam of the states offered since BeginLevel: half by least G, half by most slack. The
  // selection runs on the keys with an index (the same comparisons and moves as on the states
  // themselves, so the same states in the same order, without their 80 bytes or a look-up per
  // comparison), and only the kept states are copied out.
  void Prune(std::vector<State>* out) {
    out->clear();
    const int beam = beam_;
    if (static_cast<int>(unique_.size()) <= beam) {
      out->assign(unique_.begin(), unique_.end());
      return;
    }
    rank_.resize(unique_.size());
    for (size_t k = 0; k < unique_.size(); ++k) {
      rank_[k] = {unique_[k].g_fixed, unique_[k].Slack(), static_cast<int>(k)};
    }
    const auto half = rank_.begin() + beam / 2;
    std::nth_element(rank_.begin(), half, rank_.end(), [](const Rank& a, const Rank& b) {
      return a.g_fixed != b.g_fixed ? a.g_fixed < b.g_fixed : a.slack > b.slack;
    });
    std::nth_element(half, rank_.begin() + beam, rank_.end(),
                     [](const Rank& a, const Rank& b) { return a.slack > b.slack; });
    out->reserve(beam);
    for (int k = 0; k < beam; ++k) out->push_back(unique_[rank_[k].index]);
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
  long unbounded_n_ = 0;  // kUnbounded / k_
  int wrap_lo_ = 0;       // wrap_[i] = Mod(wrap_lo_ + i)
  std::vector<uint8_t> wrap_;
  long held_tab_ = 0;          // Admit's tables cover chunk-1 counts below this
  std::vector<long> periods_;  // periods_[v] = v / k_
  std::vector<long> most_;     // per worker and chunk-1 count: ComputeMostChunk0
  std::vector<Layout> layouts_;
  std::vector<int> group_;  // per layout: layouts with the same (y, z, u) share a group
  int num_groups_ = 0;
  // Scratch of one worker's step (BeginLevel, Offer, Prune), reused across workers.
  std::vector<State> unique_;
  std::vector<int> chain_;        // per unique_ state: the group's previous state, or -1
  std::vector<int> group_stamp_;  // per group: the worker whose chain group_head_ starts
  std::vector<int> group_head_;
  struct Rank {
    long g_fixed, slack;
    int index;  // into unique_
  };
  std::vector<Rank> rank_;
  int level_stamp_ = -1;
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
