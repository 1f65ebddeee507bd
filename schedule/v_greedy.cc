#include "schedule/v_greedy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "schedule/tolerance.h"

namespace pipetrain::schedule {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class VGreedy {
 public:
  VGreedy(int p, int m, const CostModel& costs, const VGreedyOptions& options)
      : p_(p), m_(m), s_(2 * p), costs_(costs), opt_(options) {}

  absl::StatusOr<VGreedyResult> Run(std::string name) {
    r_.schedule = MakeEmptySchedule(std::move(name), p_, m_, VPlacement(p_));
    for (int w = 0; w < p_; ++w) {
      const double one = Act(w) + Act(s_ - 1 - w);
      if (one > opt_.memory_cap + kEps) {
        return absl::InvalidArgumentError(absl::StrCat("memory_cap ", opt_.memory_cap,
                                                       " is below one microbatch's activation (",
                                                       one, " units) on worker ", w));
      }
      if (opt_.record) r_.schedule.worker_actions[w].reserve(6 * static_cast<size_t>(m_));
    }
    rem_.assign(p_, 0.0);
    for (int w = 0; w < p_; ++w) {
      const StageCost& x = costs_.stages[w];
      const StageCost& y = costs_.stages[s_ - 1 - w];
      rem_[w] = m_ * (x.f + x.b + x.w + y.f + y.b + y.w);
    }
    // Remaining work is tracked by subtraction: allow for its rounding before pruning.
    abort_at_ = opt_.abort_span + 1e-7 * (1.0 + std::abs(opt_.abort_span));
    nf_.assign(s_, 0);
    nb_.assign(s_, 0);
    nw_.assign(s_, 0);
    end_f_.assign(static_cast<size_t>(s_) * m_, 0.0);
    end_b_.assign(static_cast<size_t>(s_) * m_, 0.0);
    wq_.assign(p_, {});
    for (auto& q : wq_) q.reserve(2 * static_cast<size_t>(m_));
    wq_head_.assign(p_, 0);
    clock_.assign(p_, 0.0);
    first_.assign(p_, kInf);
    pending_.assign(p_, kInf);
    mem_.assign(p_, 0.0);
    r_.peak.assign(p_, 0.0);
    num_groups_ = (p_ + kGroup - 1) / kGroup;
    pending_.resize(static_cast<size_t>(num_groups_) * kGroup, kInf);  // padding: never pending
    group_min_.assign((num_groups_ + kGroup - 1) / kGroup * kGroup, kInf);  // (Earliest)
    for (int w = 0; w < p_; ++w) Wake(w, 0.0);
    const long total = 6L * p_ * m_;
    long remaining = total;
    // The trend stop's two moments (options.trend_abort_span): 1/4 and 3/8 of the passes done.
    const long pace_from = total - total / 4, pace_at = total - total * 3 / 8;
    std::vector<double> pace_clock, pace_rem;
    trend_at_ = opt_.trend_abort_span;
    const bool paced = trend_at_ < 1e300 || opt_.late_limits;
    for (int w = Earliest(); w >= 0; w = Earliest()) {
      now_ = pending_[w];
      // w's own wake-up time is settled by Decide, and its group's minimum is taken once after
      // it (not once for "asleep" and once more for its next time); the one notification a
      // decision may send waits until then (the minima end the same: they only depend on the
      // pending times).
      pending_[w] = kInf;
      deciding_ = w;
      const bool committed = Decide(w);
      deciding_ = -1;
      SetPending(w, pending_[w]);
      if (notify_to_ >= 0) {
        const int to = notify_to_;
        notify_to_ = -1;
        Notify(to, notify_ready_);
      }
      if (committed) --remaining;
      if (committed && paced) {
        if (remaining == pace_from) {
          pace_clock = clock_;
          pace_rem = rem_;
        } else if (remaining == pace_at) {
          if (opt_.late_limits && !TakeLateLimits()) {
            r_.pruned = true;
          } else if (!pace_clock.empty() && TrendSpan(pace_clock, pace_rem) > trend_at_) {
            r_.pruned = true;
          }
        }
      }
      if (r_.pruned) return std::move(r_);
    }
    if (remaining != 0) {
      return absl::InternalError(absl::StrCat("V greedy scheduler stalled with ", remaining,
                                              " passes left (cap ", opt_.memory_cap, ")"));
    }
    for (int w = 0; w < p_; ++w) {
      r_.max_span = std::max(r_.max_span, clock_[w] - first_[w]);
      r_.makespan = std::max(r_.makespan, clock_[w]);
    }
    return std::move(r_);
  }

 private:
  // A pass a worker could run next. ready: input arrival (kInf = producer not started yet).
  struct Cand {
    ActionKind kind = ActionKind::kF;
    int stage = -1;
    double ready = kInf;
    bool ok = false;  // exists and allowed (memory, admission)
  };

  double Act(int stage) const { return costs_.stages[stage].activation; }
  double Comm(int from, int to) const {
    // Adjacent stages on one worker: only p-1 -> p (the V's tip).
    return (from == p_ - 1 && to == p_) || (from == p_ && to == p_ - 1) ? 0.0 : costs_.comm;
  }
  size_t Idx(int stage, int mb) const { return static_cast<size_t>(stage) * m_ + mb; }

  // The pending decision times are kept in groups of kGroup workers, each with its least
  // time: a change re-takes one group's minimum (a few independent compares), and the earliest
  // worker is found from the group minima. (A tournament tree walked every level after most
  // decisions, each level waiting on the one below: half the engine's time at p = 64.)
  static constexpr int kGroup = 8;
  static_assert(kGroup == 8, "Least and EqualMask take eight");
  void SetPending(int w, double time) {
    pending_[w] = time;
    const int g = w / kGroup;
    group_min_[g] = Least(&pending_[static_cast<size_t>(g) * kGroup]);
  }
  // The least of x[0..7], as a tree of independent compares.
  static double Least(const double* x) {
    return std::min(std::min(std::min(x[0], x[1]), std::min(x[2], x[3])),
                    std::min(std::min(x[4], x[5]), std::min(x[6], x[7])));
  }
  // The longest worker span extrapolated from each worker's pace since (clock, rem) were
  // `then_clock` and `then_rem`: its span so far plus its remaining work at that pace.
  double TrendSpan(const std::vector<double>& then_clock,
                   const std::vector<double>& then_rem) const {
    double longest = 0.0;
    for (int w = 0; w < p_; ++w) {
      const double done = then_rem[w] - rem_[w], took = clock_[w] - then_clock[w];
      if (!(done > 0) || !(took > 0)) continue;
      longest = std::max(longest, clock_[w] - first_[w] + rem_[w] * took / done);
    }
    return longest;
  }
  // options.late_limits: false when the run stops (pruned).
  bool TakeLateLimits() {
    double abort_span = opt_.abort_span;
    if (!opt_.late_limits(&abort_span, &trend_at_)) return false;
    abort_at_ = std::min(abort_at_, abort_span + 1e-7 * (1.0 + std::abs(abort_span)));
    for (int w = 0; w < p_; ++w) {
      if (clock_[w] - first_[w] + rem_[w] > abort_at_) return false;  // as Commit's check
    }
    return true;
  }
  // The worker with the earliest pending decision (ties: the lowest), or -1 when none is pending.
  // Which of eight holds the least is read from a mask of equal compares, not found by a scan
  // that branches on each (a quarter of the engine's time was those branches' mispredictions
  // at p = 64).
  int Earliest() const {
    // (group_min_ is padded to whole eights with kInf.)
    double least = Least(&group_min_[0]);
    for (int g = kGroup; g < num_groups_; g += kGroup)
      least = std::min(least, Least(&group_min_[g]));
    if (!(least < kInf)) return -1;
    int g = 0;
    for (;; g += kGroup) {
      const unsigned at = EqualMask(&group_min_[g], least);
      if (at != 0) {
        g += std::countr_zero(at);
        break;
      }
    }
    return g * kGroup +
           std::countr_zero(EqualMask(&pending_[static_cast<size_t>(g) * kGroup], least));
  }
  // Bit i set where x[i] == value, for x[0..7] (SSE2, which every x86-64 has: four compares of
  // two; elsewhere eight scalar ones, also branch-free).
  static unsigned EqualMask(const double* x, double value) {
#ifdef __SSE2__
    const __m128d v = _mm_set1_pd(value);
    unsigned mask = 0;
    for (int i = 0; i < kGroup; i += 2) {
      mask |= static_cast<unsigned>(_mm_movemask_pd(_mm_cmpeq_pd(_mm_loadu_pd(x + i), v))) << i;
    }
    return mask;
#else
    unsigned mask = 0;
    for (int i = 0; i < kGroup; ++i) mask |= static_cast<unsigned>(x[i] == value) << i;
    return mask;
#endif
  }
  void Wake(int w, double time) {
    if (w == deciding_) {
      pending_[w] = time;  // its group catches up after the decision
    } else {
      SetPending(w, time);
    }
  }
  void Notify(int w, double ready) {
    if (deciding_ >= 0) {  // sent after the decision (at most one per decision)
      notify_to_ = w;
      notify_ready_ = ready;
      return;
    }
    const double when = std::max({clock_[w], ready, now_});
    if (when < pending_[w]) Wake(w, when);
  }

  Cand Forward(int stage) const {
    Cand c{ActionKind::kF, stage};
    const int j = nf_[stage];
    if (j >= m_) return c;
    c.ok = true;
    if (stage == 0) {
      c.ready = std::max(0.0, (j - opt_.front_load) * opt_.release_period);
    } else if (nf_[stage - 1] > j) {
      c.ready = end_f_[Idx(stage - 1, j)] + Comm(stage - 1, stage);
    }
    return c;
  }
  Cand Backward(int stage) const {
    Cand c{ActionKind::kB, stage};
    const int j = nb_[stage];
    if (j >= m_) return c;
    c.ok = true;
    if (stage == s_ - 1) {
      if (nf_[stage] > j) c.ready = end_f_[Idx(stage, j)];
    } else if (nb_[stage + 1] > j) {
      c.ready = end_b_[Idx(stage + 1, j)] + Comm(stage + 1, stage);
    }
    return c;
  }

  bool Decide(int w) {
    const double now = now_;
    const int a = w, b = s_ - 1 - w;
    const double a0 = Act(a), a1 = Act(b), cap = opt_.memory_cap + kEps;
    const double mem = mem_[w];

    Cand b1 = Backward(b), b0 = Backward(a);
    Cand f1 = Forward(b), f0 = Forward(a);
    bool mem_blocked = false;  // an F's input is there but memory is not
    if (f1.ok && mem + a1 > cap) {
      f1.ok = false;
      mem_blocked |= f1.ready <= now + kEps;
    }
    if (f0.ok) {
      const double first_leg = a0 * (nf_[a] - nf_[b]);
      const double releasable = mem - first_leg;
      f0.ok = mem + a0 <= cap && (mem + a0 + a1 <= cap || releasable >= a1 - kEps);
      if (!f0.ok) mem_blocked |= f0.ready <= now + kEps;
      if (f0.ok && !opt_.max_inflight.empty()) f0.ok = nf_[a] - nb_[a] < opt_.max_inflight[w];
    }
    auto is_ready = [&](const Cand& c) { return c.ok && c.ready <= now + kEps; };
    // 1. B's.
    const Cand* pick = nullptr;
    if (opt_.f1_over_b && is_ready(f1)) {
      pick = &f1;
    } else if (is_ready(b1) && is_ready(b0)) {
      // b0's microbatch is always the older one (its chunk-1 B already ran here).
      pick = opt_.b_older_first ? &b0 : &b1;
    } else if (is_ready(b1)) {
      pick = &b1;
    } else if (is_ready(b0)) {
      pick = &b0;
    }
    // 2. F's.
    if (pick == nullptr) {
      if (is_ready(f1) && is_ready(f0)) {
        pick = opt_.f1_first ? &f1 : &f0;
      } else if (is_ready(f1)) {
        pick = &f1;
      } else if (is_ready(f0)) {
        pick = &f0;
      }
    }
    if (pick != nullptr) {
      Commit(w, pick->kind, pick->stage, std::max(now, pick->ready));
      return true;
    }
    // 3. W's, unless a known arrival is so close that waiting is cheaper than delaying it.
    double next = kInf;
    for (const Cand* c : {&b1, &b0, &f1, &f0}) {
      if (c->ok && c->ready > now + kEps) next = std::min(next, c->ready);
    }
    const auto& q = wq_[w];
    if (wq_head_[w] < q.size()) {
      const int stage = q[wq_head_[w]];
      const double dw = costs_.stages[stage].w;
      const bool collides = next < now + dw - kEps;
      const bool forwards_left = nf_[a] < m_ || nf_[b] < m_;
      const double backlog = static_cast<double>(q.size() - wq_head_[w]);
      const bool hold =
          !mem_blocked && forwards_left && backlog <= opt_.w_reserve * 2 * (p_ - 1 - w);
      if (!hold && !(collides && next - now < opt_.idle_budget * dw)) {
        Commit(w, ActionKind::kW, stage, now);
        return true;
      }
    }
    if (next < kInf) Wake(w, next);
    return false;  // otherwise asleep until an input arrives
  }

  void Commit(int w, ActionKind kind, int stage, double start) {
    const StageCost& c = costs_.stages[stage];
    double end = start;
    int mb = 0;
    if (kind == ActionKind::kF) {
      mb = nf_[stage]++;
      end = start + c.f;
      end_f_[Idx(stage, mb)] = end;
      mem_[w] += c.activation;
      r_.peak[w] = std::max(r_.peak[w], mem_[w]);
      if (stage + 1 < s_)
        Notify(r_.schedule.stage_to_worker[stage + 1], end + Comm(stage, stage + 1));
    } else if (kind == ActionKind::kB) {
      mb = nb_[stage]++;
      end = start + c.b;
      end_b_[Idx(stage, mb)] = end;
      mem_[w] -= c.freed_by_b;
      wq_[w].push_back(stage);
      if (stage > 0) Notify(r_.schedule.stage_to_worker[stage - 1], end + Comm(stage, stage - 1));
    } else {
      ++wq_head_[w];
      mb = nw_[stage]++;
      end = start + c.w;
      mem_[w] -= c.activation - c.freed_by_b;
    }
    first_[w] = std::min(first_[w], start);
    clock_[w] = end;
    rem_[w] -= kind == ActionKind::kF ? c.f : (kind == ActionKind::kB ? c.b : c.w);
    if (end - first_[w] + rem_[w] > abort_at_) r_.pruned = true;
    if (opt_.record) r_.schedule.worker_actions[w].push_back(Action{kind, stage, mb});
    Wake(w, end);
  }

  const int p_, m_, s_;
  const CostModel& costs_;
  const VGreedyOptions& opt_;
  std::vector<int> nf_, nb_, nw_;
  std::vector<double> end_f_, end_b_;
  std::vector<std::vector<int>> wq_;  // per worker: stages of pending W's, in B order
  std::vector<size_t> wq_head_;
  std::vector<double> clock_, first_, pending_, mem_;
  std::vector<double> rem_;  // per worker: work not yet committed
  double abort_at_ = kInf;
  double trend_at_ = kInf;  // options.trend_abort_span, or late_limits' value
  // pending_: per worker, its next decision time (kInf = asleep until notified), padded to whole
  // groups; group_min_: the least of each group's.
  int num_groups_ = 0;
  std::vector<double> group_min_;
  double now_ = 0.0;
  int deciding_ = -1;   // the worker whose decision runs (its group minimum is stale meanwhile)
  int notify_to_ = -1;  // the decision's notification, sent after it
  double notify_ready_ = 0.0;
  VGreedyResult r_;
};

}  // namespace

absl::StatusOr<VGreedyResult> GreedyScheduleV(int num_workers, int num_microbatches,
                                              const CostModel& costs, const VGreedyOptions& options,
                                              std::string name) {
  if (num_workers < 2 || num_microbatches < 1 ||
      static_cast<int>(costs.stages.size()) != 2 * num_workers) {
    return absl::InvalidArgumentError("GreedyScheduleV: p >= 2, m >= 1 and 2p stage costs");
  }
  if (!options.max_inflight.empty() &&
      static_cast<int>(options.max_inflight.size()) != num_workers) {
    return absl::InvalidArgumentError("GreedyScheduleV: max_inflight needs one entry per worker");
  }
  VGreedy engine(num_workers, num_microbatches, costs, options);
  return engine.Run(std::move(name));
}

}  // namespace pipetrain::schedule
