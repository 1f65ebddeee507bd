#include "schedule/v_modulo_variants.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schedule/v_block_search.h"
#include "schedule/v_modulo_block.h"

namespace pipetrain::schedule {

std::vector<VVariant> ModuloBlockVariants(
    int p, const CostModel& costs, double cap, int m,
    const std::function<std::optional<double>(bool wait)>& beat_span) {
  const int slots = ModuloGridSlots(p, costs);
  ModuloBlockOptions modulo;
  modulo.beam = std::clamp(512 / p, 8, 32);  // as the searched blocks': linear in p x beam
  modulo.max_results = p <= 16 ? 3 : 1;      // each is a candidate run; fewer at large p
  modulo.max_steps = std::min(1'000'000, 12'000'000 / p);  // narrower: more layouts per period
  // A hard limit that binds only past p = 16 (3.9M transitions per search there, 244k at p = 64):
  // with real costs the grid is fine (1:1.5:0.5, comm 0.2: 60+ slots, 10^4-10^5 layouts) and
  // without it one v-half at p = 64 took 2.7 s.
  modulo.max_transitions = 1'000'000'000 / (p * p);
  std::map<int, std::vector<BuildingBlock>> by_extra;  // every search made, by its extra slots
  auto found_at = [&](int extra) {
    auto [at, added] = by_extra.try_emplace(extra);
    if (added) {
      modulo.extra_slots = extra;
      at->second = ModuloVBlocks(p, costs, cap, modulo);
    }
    return !at->second.empty();
  };
  // Returns the shortest period's extra slots (-1: none) for periods up to max_extra.
  auto shortest = [&](int max_extra, const std::function<bool(int)>& found) {
    if (max_extra < 0) return -1;
    int at = found(0) ? 0 : -1;
    for (auto [lo, hi] : {std::pair{1, slots / 5}, std::pair{slots / 5 + 1, slots / 2}}) {
      if (at >= 0) break;
      hi = std::min(hi, max_extra);
      bool top_tried = false;
      while (lo <= hi) {  // bisection down to the shortest period found in [lo, hi]
        const int mid = (lo + hi) / 2;
        const bool here = found(mid);
        if (!here && at < 0 && !top_tried && mid < hi) {
          // Nothing yet in this range: try its longest period before narrowing in on the upper
          // half. When even that has no block (a longer period rarely fits worse), the range is
          // done: the upper half's searches, which cost more as the period has more layouts,
          // would find nothing either (p = 64, V-Min's cap, 1:1.5:0.5 with comm 0.2: 5
          // searches instead of 10).
          top_tried = true;
          if (!found(hi)) break;
          at = hi;
          lo = mid + 1;
          hi = hi - 1;
          continue;
        }
        if (here) {
          at = mid;
          hi = mid - 1;
        } else {
          lo = mid + 1;
        }
      }
    }
    return at;
  };
  std::optional<double> beat = beat_span(false);
  if (!beat) {
    // Ahead of the bound: once it is known, the remaining searches answer "none" at once and the
    // bisection winds down (at most two more steps per range).
    shortest(slots / 2, [&](int extra) {
      if (!beat) beat = beat_span(false);
      return !beat && found_at(extra);
    });
    if (!beat) beat = beat_span(true);
    if (!beat) return {};
  }
  int max_extra = slots / 2;
  const VChunkCosts grid = LargestVChunkCosts(p, costs);
  const double q = grid.work / slots;
  bool exact = m > 1 && *beat < 1e300;
  for (double x : {grid.f, grid.b, grid.w, grid.comm}) {
    exact &= std::abs(x / q - std::round(x / q)) < 1e-6;
  }
  if (exact) {
    double chain = 4.0 * (p - 1) * costs.comm;
    for (const StageCost& c : costs.stages) chain += c.f + c.b;
    // The longest period whose bound does not pass beat_span (a tie may still win on makespan),
    // in slots beyond the work's own period.
    const double useful = (*beat - chain) / (m - 1) / q - slots;
    max_extra = std::min(max_extra, static_cast<int>(std::floor(useful + 1e-9)));
  }
  const int at = shortest(max_extra, found_at);
  std::vector<VVariant> out;
  if (at < 0) return out;
  std::vector<BuildingBlock>& blocks = by_extra[at];
  for (size_t k = 0; k < blocks.size(); ++k) {
    VVariant v;
    v.label = absl::StrCat("modulo block ", slots, "+", at, " slots #", k);
    v.fixed_block = std::move(blocks[k]);
    out.push_back(std::move(v));
  }
  return out;
}

ModuloLane::ModuloLane(int p, const CostModel& costs, double cap, int m, bool own_thread)
    : p_(p), costs_(costs), cap_(cap), m_(m) {
  if (own_thread) {
    thread_ = std::jthread([this](std::stop_token stop) { blocks_ = Run(stop); });
  }
}

void ModuloLane::SetBeat(double span) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    beat_ = span;
  }
  known_.notify_all();
}

std::vector<VVariant> ModuloLane::Take() {
  if (!thread_.joinable()) return Run(std::stop_token());
  thread_.join();
  return std::move(blocks_);
}

std::vector<VVariant> ModuloLane::Run(std::stop_token stop) {
  return ModuloBlockVariants(p_, costs_, cap_, m_, [&](bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) known_.wait(lock, stop, [&] { return beat_.has_value(); });
    return beat_;
  });
}

}  // namespace pipetrain::schedule
