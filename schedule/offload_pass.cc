#include "schedule/offload_pass.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "schedule/engine.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

bool IsBackward(ActionKind k) { return k == ActionKind::kB || k == ActionKind::kBW; }

int64_t StashKey(int stage, int mb) { return (static_cast<int64_t>(stage) << 32) | mb; }

// First timeline index of each worker's list.
std::vector<size_t> Offsets(const Schedule& s) {
  std::vector<size_t> off(s.num_workers + 1, 0);
  for (int w = 0; w < s.num_workers; ++w) off[w + 1] = off[w] + s.worker_actions[w].size();
  return off;
}

struct Located {
  int f_pos = -1, b_pos = -1;
};

// Per worker: the F and first-backward list positions of every stash.
std::vector<absl::flat_hash_map<int64_t, Located>> Locate(const Schedule& s) {
  std::vector<absl::flat_hash_map<int64_t, Located>> out(s.num_workers);
  for (int w = 0; w < s.num_workers; ++w) {
    const auto& list = s.worker_actions[w];
    for (int k = 0; k < static_cast<int>(list.size()); ++k) {
      const Action& a = list[k];
      if (a.kind == ActionKind::kF) out[w][StashKey(a.stage, a.microbatch)].f_pos = k;
      if (IsBackward(a.kind)) {
        Located& l = out[w][StashKey(a.stage, a.microbatch)];
        if (l.b_pos < 0) l.b_pos = k;
      }
    }
  }
  return out;
}

absl::Status CheckComputeOnly(const Schedule& s) {
  const ActionScan scan = ScanActions(s);
  if (scan.HasTransfers() || scan.HasOffload()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offload pass: schedule \"", s.name,
        "\" must be compute-only (run it before AddTransfers, and only once)"));
  }
  if (scan.Has(ActionKind::kOverlapF)) {
    // An OFFLOAD placed after an overlapped F would split the pair.
    return absl::InvalidArgumentError(absl::StrCat(
        "offload pass: schedule \"", s.name,
        "\" has overlapped F+B pairs (OVERLAP_F); activation offload does not support them"));
  }
  return ValidateSchedule(s);
}

}  // namespace

absl::StatusOr<OffloadMode> ParseOffloadMode(absl::string_view name) {
  if (name == "none") return OffloadMode::kNone;
  if (name == "half") return OffloadMode::kHalf;
  if (name == "full") return OffloadMode::kFull;
  if (name == "selective") return OffloadMode::kSelective;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown offload mode \"", name, "\"; valid: none, half, full, selective"));
}

const char* OffloadModeName(OffloadMode mode) {
  switch (mode) {
    case OffloadMode::kNone:
      return "none";
    case OffloadMode::kHalf:
      return "half";
    case OffloadMode::kFull:
      return "full";
    case OffloadMode::kSelective:
      return "selective";
    case OffloadMode::kFraction:
      return "fraction";
  }
  return "?";
}

absl::StatusOr<std::vector<std::vector<OffloadCandidate>>> OffloadCandidates(
    const Schedule& compute, const CostModel& costs, const OffloadOptions& options) {
  PT_RETURN_IF_ERROR(CheckComputeOnly(compute));
  PT_ASSIGN_OR_RETURN(SimResult base, Simulate(compute, costs));
  const std::vector<size_t> off = Offsets(compute);
  const auto located = Locate(compute);
  std::vector<std::vector<OffloadCandidate>> out(compute.num_workers);
  for (int w = 0; w < compute.num_workers; ++w) {
    for (const auto& [key, l] : located[w]) {
      if (l.f_pos < 0 || l.b_pos < 0) continue;
      OffloadCandidate c;
      c.worker = w;
      c.stage = static_cast<int>(key >> 32);
      c.microbatch = static_cast<int>(key & 0xffffffff);
      c.lifespan = base.timeline[off[w] + l.b_pos].start - base.timeline[off[w] + l.f_pos].end;
      const double round_trip = costs.OffloadTime(c.stage) + costs.ReloadTime(c.stage);
      // At least one compute action in between: the device copy is released at a compute end.
      c.eligible = l.b_pos > l.f_pos + 1 && c.lifespan > 0 &&
                   c.lifespan >= options.min_lifespan_factor * round_trip;
      out[w].push_back(c);
    }
    std::sort(out[w].begin(), out[w].end(),
              [&](const OffloadCandidate& a, const OffloadCandidate& b) {
                if (a.lifespan != b.lifespan) return a.lifespan > b.lifespan;
                return located[w].at(StashKey(a.stage, a.microbatch)).f_pos <
                       located[w].at(StashKey(b.stage, b.microbatch)).f_pos;
              });
  }
  return out;
}

absl::StatusOr<OffloadPlan> InsertOffloads(const Schedule& compute, const CostModel& costs,
                                           const std::vector<OffloadCandidate>& chosen_in,
                                           const OffloadOptions& options) {
  PT_RETURN_IF_ERROR(CheckComputeOnly(compute));
  PT_ASSIGN_OR_RETURN(SimResult base, Simulate(compute, costs));
  const std::vector<size_t> off = Offsets(compute);
  const auto located = Locate(compute);
  int stashes = 0;
  for (const auto& per : located) stashes += static_cast<int>(per.size());
  for (const OffloadCandidate& c : chosen_in) {
    auto it = located[c.worker].find(StashKey(c.stage, c.microbatch));
    if (it == located[c.worker].end() || it->second.f_pos < 0 || it->second.b_pos <= it->second.f_pos) {
      return absl::InvalidArgumentError(absl::StrCat("offload pass: stage ", c.stage,
                                                     " microbatch ", c.microbatch,
                                                     " has no F before its backward on worker ",
                                                     c.worker));
    }
  }
  // Book the copy engines; drop what cannot free anything. Lead = backward start - reload start.
  std::vector<OffloadCandidate> chosen;
  std::vector<double> lead;
  std::vector<double> copy_end;  // booked end of each chosen stash's D2H copy
  for (int w = 0; w < compute.num_workers; ++w) {
    struct Booked {
      const OffloadCandidate* c;
      double f_end, b_start, next_end, d2h_end = 0, h2d_start = 0;
      bool keep = true;
    };
    std::vector<Booked> mine;
    for (const OffloadCandidate& c : chosen_in) {
      if (c.worker != w) continue;
      const Located& l = located[w].at(StashKey(c.stage, c.microbatch));
      // The compute right after F ends when the copy must be done (else the worker stalls).
      mine.push_back({&c, base.timeline[off[w] + l.f_pos].end, base.timeline[off[w] + l.b_pos].start,
                      base.timeline[off[w] + l.f_pos + 1].end});
    }
    const double shared = costs.duplex ? 0.0 : 1.0;  // one engine: each copy also blocks the other
    for (int round = 0; round < 2; ++round) {
      std::sort(mine.begin(), mine.end(), [](const Booked& a, const Booked& b) { return a.f_end < b.f_end; });
      double engine = 0;
      for (Booked& b : mine) {
        if (!b.keep) continue;
        const int st = b.c->stage;
        b.d2h_end = std::max(b.f_end, engine) + costs.OffloadTime(st) + shared * costs.ReloadTime(st);
        if (!options.wait_for_copies && !options.explicit_release &&
            b.d2h_end > b.next_end + 1e-12) {
          b.keep = false;  // would stall the worker at the end of the compute after F
          continue;
        }
        engine = b.d2h_end;
      }
      std::sort(mine.begin(), mine.end(), [](const Booked& a, const Booked& b) { return a.b_start > b.b_start; });
      double cursor = 1e300;
      bool dropped = false;
      for (Booked& b : mine) {
        if (!b.keep) continue;
        const int st = b.c->stage;
        const double r = costs.ReloadTime(st) + shared * costs.OffloadTime(st);
        const double latest = b.b_start - std::max(r, options.lead_factor * costs.ReloadTime(st));
        b.h2d_start = std::min(latest, cursor - r);
        if (b.h2d_start < b.d2h_end) {
          b.keep = false;
          dropped = true;
          continue;
        }
        cursor = b.h2d_start;
      }
      if (!dropped) break;
    }
    for (const Booked& b : mine) {
      if (!b.keep) continue;
      chosen.push_back(*b.c);
      lead.push_back(b.b_start - b.h2d_start);
      copy_end.push_back(b.d2h_end);
    }
  }
  OffloadPlan plan;
  for (int round = 0;; ++round) {
    Schedule out = compute;
    out.name = chosen.empty() ? compute.name : absl::StrCat(compute.name, "+offload");
    for (int w = 0; w < compute.num_workers; ++w) {
      const auto& list = compute.worker_actions[w];
      const int n = static_cast<int>(list.size());
      // (backward position, action) so reloads before one spot go in backward order.
      std::vector<std::vector<std::pair<int, Action>>> before(n + 1);
      // (F position, action): releases before one spot go in F order.
      std::vector<std::vector<std::pair<int, Action>>> release_before(n + 1);
      std::vector<bool> offload_after(n, false);
      for (size_t c = 0; c < chosen.size(); ++c) {
        if (chosen[c].worker != w) continue;
        const Located& l = located[w].at(StashKey(chosen[c].stage, chosen[c].microbatch));
        offload_after[l.f_pos] = true;
        const double target = base.timeline[off[w] + l.b_pos].start - lead[c];
        int j = l.f_pos + 1;  // never before the OFFLOAD
        while (j + 1 <= l.b_pos && base.timeline[off[w] + j].end <= target) ++j;
        before[j].push_back({l.b_pos, {ActionKind::kReload, chosen[c].stage, chosen[c].microbatch}});
        if (options.explicit_release) {
          // Before the first compute that starts once the copy is booked done, at the latest
          // before the second forward after F, and never after the RELOAD (at j).
          int r = l.f_pos + 1, forwards = 0;
          for (; r < j; ++r) {
            const Action& x = list[r];
            if (!IsCompute(x.kind)) continue;
            if (x.kind == ActionKind::kF && ++forwards == 2) break;
            if (base.timeline[off[w] + r].start >= copy_end[c] - 1e-12) break;
          }
          release_before[r].push_back(
              {l.f_pos, {ActionKind::kRelease, chosen[c].stage, chosen[c].microbatch}});
        }
      }
      std::vector<Action>& dst = out.worker_actions[w];
      dst.clear();
      for (int k = 0; k < n; ++k) {
        std::sort(before[k].begin(), before[k].end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        // RELOADs are issued first (a RELEASE may wait for its copy; the reloads must not), except
        // that a stash released here is released before its own RELOAD.
        std::sort(release_before[k].begin(), release_before[k].end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        auto reloaded_here = [&](const Action& a) {
          for (const auto& [pos, r] : before[k]) {
            if (r.stage == a.stage && r.microbatch == a.microbatch) return true;
          }
          return false;
        };
        for (const auto& [pos, a] : release_before[k]) {
          if (reloaded_here(a)) dst.push_back(a);
        }
        for (const auto& [pos, a] : before[k]) dst.push_back(a);
        for (const auto& [pos, a] : release_before[k]) {
          if (!reloaded_here(a)) dst.push_back(a);
        }
        dst.push_back(list[k]);
        if (offload_after[k]) dst.push_back({ActionKind::kOffload, list[k].stage, list[k].microbatch});
      }
    }
    PT_RETURN_IF_ERROR(ValidateSchedule(out));
    PT_ASSIGN_OR_RETURN(SimResult sim, Simulate(out, costs));
    // Late reloads: copy end after the backward's planned start.
    absl::flat_hash_map<int64_t, double> reload_end;
    for (const TimedAction& t : sim.timeline) {
      if (t.action.kind == ActionKind::kReload) {
        reload_end[StashKey(t.action.stage, t.action.microbatch)] = t.end;
      }
    }
    bool raised = false;
    const double eps = 1e-9 * std::max(1.0, base.makespan);
    for (size_t c = 0; c < chosen.size(); ++c) {
      const Located& l = located[chosen[c].worker].at(StashKey(chosen[c].stage, chosen[c].microbatch));
      const double planned = base.timeline[off[chosen[c].worker] + l.b_pos].start;
      const double late = reload_end[StashKey(chosen[c].stage, chosen[c].microbatch)] - planned;
      if (late > eps) {
        lead[c] += late;
        raised = true;
      }
    }
    plan.schedule = std::move(out);
    plan.sim = std::move(sim);
    if (!raised || round == 3) break;
  }
  plan.offloaded = static_cast<int>(chosen.size());
  plan.stashes = stashes;
  return plan;
}

namespace {

// The order in which the partial modes take each worker's eligible stashes: greedily, by
// re-simulation. Each round adds, per worker, the not-yet-chosen stashes resident at the most of
// the worker's current peak moments (longest lifespan first among equals), then re-plans and
// re-simulates, so the next round aims at wherever the peak moved. Rounds add up to `batch`
// stashes per worker (about 32 rounds in all), which keeps it to a few dozen InsertOffloads.
absl::StatusOr<std::vector<std::vector<OffloadCandidate>>> GreedyOrder(
    const Schedule& compute, const CostModel& costs,
    const std::vector<std::vector<OffloadCandidate>>& ok, const OffloadOptions& booking) {
  const int p = compute.num_workers;
  std::vector<std::vector<OffloadCandidate>> order(p);
  std::vector<std::vector<bool>> taken(p);
  std::vector<int> batch(p);
  size_t total = 0;
  for (int w = 0; w < p; ++w) {
    taken[w].assign(ok[w].size(), false);
    batch[w] = std::max<int>(1, static_cast<int>((ok[w].size() + 31) / 32));
    total += ok[w].size();
  }
  std::vector<OffloadCandidate> chosen;
  PT_ASSIGN_OR_RETURN(SimResult sim, Simulate(compute, costs));
  Schedule current = compute;
  while (chosen.size() < total) {
    // What offloading a stash would take off the device in the current plan: from the end of
    // the compute after its F (the release) to its reload's issue before the backward.
    absl::flat_hash_map<int64_t, std::pair<double, double>> live;
    std::vector<int64_t> unreleased;
    int last_worker = -1;
    for (const TimedAction& t : sim.timeline) {
      if (t.worker != last_worker) unreleased.clear();
      last_worker = t.worker;
      if (!IsCompute(t.action.kind)) continue;
      const int64_t key = (static_cast<int64_t>(t.worker) << 48) ^ StashKey(t.action.stage, t.action.microbatch);
      for (int64_t u : unreleased) live[u].first = t.end;
      unreleased.clear();
      if (t.action.kind == ActionKind::kF) {
        live[key].first = 1e300;
        unreleased.push_back(key);
      }
      if (IsBackward(t.action.kind) && live[key].second == 0) {
        live[key].second = t.start - std::max(1.0, booking.lead_factor) * costs.ReloadTime(t.action.stage);
      }
    }
    for (int w = 0; w < p; ++w) {
      std::vector<double> moments;
      const double peak = sim.peak_memory[w];
      for (const MemoryPoint& m : sim.memory_curve[w]) {
        if (m.units >= peak - 1e-9) moments.push_back(m.time);
      }
      std::vector<std::pair<int, int>> score;  // (-moments covered, index in lifespan order)
      for (int i = 0; i < static_cast<int>(ok[w].size()); ++i) {
        if (taken[w][i]) continue;
        const int64_t key = (static_cast<int64_t>(w) << 48) ^ StashKey(ok[w][i].stage, ok[w][i].microbatch);
        const auto& [from, to] = live[key];
        int covered = 0;
        for (double t : moments) covered += from <= t && t < to;
        score.push_back({-covered, i});
      }
      std::sort(score.begin(), score.end());
      for (int j = 0; j < batch[w] && j < static_cast<int>(score.size()); ++j) {
        const int i = score[j].second;
        taken[w][i] = true;
        order[w].push_back(ok[w][i]);
        chosen.push_back(ok[w][i]);
      }
    }
    if (chosen.size() == total) break;
    PT_ASSIGN_OR_RETURN(OffloadPlan plan, InsertOffloads(compute, costs, chosen, booking));
    sim = std::move(plan.sim);
    // A stash the booking dropped stays in `chosen`: it is resident like any other.
  }
  return order;
}

}  // namespace

absl::StatusOr<OffloadPlan> AddOffload(const Schedule& compute, const CostModel& costs,
                                       const OffloadOptions& options) {
  PT_ASSIGN_OR_RETURN(auto candidates, OffloadCandidates(compute, costs, options));
  int eligible = 0;
  std::vector<std::vector<OffloadCandidate>> ok(compute.num_workers);
  for (int w = 0; w < compute.num_workers; ++w) {
    for (const OffloadCandidate& c : candidates[w]) {
      if (c.eligible) ok[w].push_back(c);
    }
    eligible += static_cast<int>(ok[w].size());
  }
  // Per worker: how many of its eligible stashes (longest lifespan first) to offload.
  std::vector<int> count(compute.num_workers, 0);
  OffloadOptions booking = options;
  booking.wait_for_copies = false;
  booking.explicit_release = false;
  auto build = [&](const std::vector<int>& counts) {
    std::vector<OffloadCandidate> chosen;
    for (int w = 0; w < compute.num_workers; ++w) {
      chosen.insert(chosen.end(), ok[w].begin(), ok[w].begin() + counts[w]);
    }
    return InsertOffloads(compute, costs, chosen, booking);
  };
  PT_ASSIGN_OR_RETURN(SimResult base, Simulate(compute, costs));
  const double max_makespan = base.makespan * (1 + std::max(0.0, options.max_slowdown)) +
                              1e-9 * std::max(1.0, base.makespan);
  // The booking: the one whose plan with everything offloaded peaks lowest within the slowdown
  // (strict, then waiting, then explicit release on ties).
  if (options.mode != OffloadMode::kNone) {
    std::vector<int> all(compute.num_workers);
    for (int w = 0; w < compute.num_workers; ++w) all[w] = static_cast<int>(ok[w].size());
    PT_ASSIGN_OR_RETURN(OffloadPlan strict_all, build(all));
    double best = MaxPeak(strict_all.sim);
    OffloadOptions chosen = booking;
    for (int variant = 0; variant < 2; ++variant) {
      OffloadOptions trial = booking;
      trial.wait_for_copies = variant == 0;
      trial.explicit_release = variant == 1;
      std::swap(booking, trial);
      PT_ASSIGN_OR_RETURN(OffloadPlan plan, build(all));
      std::swap(booking, trial);
      if (plan.sim.makespan <= max_makespan && MaxPeak(plan.sim) < best - 1e-9) {
        best = MaxPeak(plan.sim);
        chosen = trial;
      }
    }
    booking = chosen;
  }
  // Partial modes take stashes in the greedy re-simulated order (full and none take all/none).
  std::vector<std::vector<OffloadCandidate>> by_lifespan = ok;
  if (options.mode == OffloadMode::kHalf || options.mode == OffloadMode::kFraction ||
      options.mode == OffloadMode::kSelective) {
    PT_ASSIGN_OR_RETURN(ok, GreedyOrder(compute, costs, ok, booking));
  }
  switch (options.mode) {
    case OffloadMode::kNone:
      break;
    case OffloadMode::kFull:
      for (int w = 0; w < compute.num_workers; ++w) count[w] = static_cast<int>(ok[w].size());
      break;
    case OffloadMode::kHalf:
    case OffloadMode::kFraction: {
      const double f = options.mode == OffloadMode::kHalf ? 0.5 : options.fraction;
      if (!(f >= 0 && f <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("offload fraction must be in 0..1 (got ", options.fraction, ")"));
      }
      for (int w = 0; w < compute.num_workers; ++w) {
        const int want = static_cast<int>(std::ceil(f * candidates[w].size() - 1e-9));
        count[w] = std::min(want, static_cast<int>(ok[w].size()));
      }
      break;
    }
    case OffloadMode::kSelective: {
      if (!(options.memory_limit > 0)) {
        return absl::InvalidArgumentError(
            "offload selective needs memory_limit > 0 (the peak per worker to reach)");
      }
      const double limit = options.memory_limit + 1e-9;
      // Per worker, the fewest stashes that bring its peak under the limit (others held at
      // their current counts); a final pass raises any worker the others' choices pushed over.
      for (int pass = 0; pass < 2; ++pass) {
        for (int w = 0; w < compute.num_workers; ++w) {
          int lo = count[w], hi = static_cast<int>(ok[w].size());
          std::vector<int> trial = count;
          trial[w] = hi;
          PT_ASSIGN_OR_RETURN(OffloadPlan all, build(trial));
          if (all.sim.peak_memory[w] > limit) {
            count[w] = hi;  // cannot fit; reported below
            continue;
          }
          while (lo < hi) {
            const int mid = (lo + hi) / 2;
            trial[w] = mid;
            PT_ASSIGN_OR_RETURN(OffloadPlan t, build(trial));
            if (t.sim.peak_memory[w] <= limit) {
              hi = mid;
            } else {
              lo = mid + 1;
            }
          }
          count[w] = lo;
        }
      }
      break;
    }
  }
  PT_ASSIGN_OR_RETURN(OffloadPlan plan, build(count));
  if (options.mode == OffloadMode::kHalf || options.mode == OffloadMode::kFraction) {
    // The same counts in plain lifespan order (the paper's PO-H) when that peaks lower.
    std::swap(ok, by_lifespan);
    PT_ASSIGN_OR_RETURN(OffloadPlan longest, build(count));
    if (MaxPeak(longest.sim) < MaxPeak(plan.sim) - 1e-9) {
      plan = std::move(longest);
    } else {
      std::swap(ok, by_lifespan);
    }
  }
  if (options.mode != OffloadMode::kSelective && options.mode != OffloadMode::kNone) {
    // Never worse than no offload: a worker whose peak rose (copies in flight plus early
    // reloads outweighing what was freed) keeps its activations.
    bool changed = false;
    for (int w = 0; w < compute.num_workers; ++w) {
      if (count[w] > 0 && plan.sim.peak_memory[w] > base.peak_memory[w] + 1e-9) {
        count[w] = 0;
        changed = true;
      }
    }
    if (changed) {
      PT_ASSIGN_OR_RETURN(plan, build(count));
    }
  }
  plan.eligible = eligible;
  if (options.mode == OffloadMode::kSelective) {
    for (int w = 0; w < compute.num_workers; ++w) {
      if (plan.sim.peak_memory[w] > options.memory_limit + 1e-9) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "offload selective: worker %d still peaks at %.4g > memory_limit %.4g after "
            "offloading all %d of its eligible stashes (of %d; a stash is eligible when its "
            "F->B lifespan hides %.3g round trips); the smallest peak full offload reaches is "
            "%.4g",
            w, plan.sim.peak_memory[w], options.memory_limit, static_cast<int>(ok[w].size()),
            static_cast<int>(candidates[w].size()), options.min_lifespan_factor,
            MaxPeak(plan.sim)));
      }
    }
  }
  return plan;
}

}  // namespace pipetrain::schedule
