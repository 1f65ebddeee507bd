#include "tests/schedule_zb/authors_zbv_baseline.h"

#include <algorithm>
#include <deque>
#include <optional>

namespace pipetrain::schedule::testing {
namespace {

// Passes of a stage: chunk-0 F, chunk-1 F, chunk-1 B ("down": stage 0 -> p-1), chunk-0 B
// ("up": stage p-1 -> 0), and the two W's.
enum Pass { kF0 = 0, kF1 = 1, kBDown = 2, kBUp = 3, kW0 = 4, kW1 = 5 };

struct Run {
  std::vector<std::vector<Action>> order;
  std::vector<double> idle;  // per stage, after its first F
  double max_idle = 0;
  double max_span = 0;
  double peak = 0;  // chunk units
  bool ok = true;
};

class ZbvBuilder {
 public:
  ZbvBuilder(int p, int m, double f, double b, double w, double comm, bool fill_b, bool fill_f,
             const std::vector<double>* approved)
      : p_(p),
        m_(m),
        f_(f),
        b_(b),
        w_(w),
        comm_(comm),
        fill_b_(fill_b),
        fill_f_(fill_f),
        approved_(approved),
        cap_(2.0 * p) {
    count_.assign(p, std::vector<int>(6, 0));
    end_.assign(4, std::vector<std::vector<double>>(p, std::vector<double>(m, -1.0)));
    now_.assign(p, 0.0);
    first_.assign(p, -1.0);
    mem_.assign(p, 0.0);
    pending_w_.assign(p, {});
    run_.order.assign(p, {});
    run_.idle.assign(p, 0.0);
    if (approved_ != nullptr) {
      max_approved_ = *std::max_element(approved_->begin(), approved_->end());
    }
  }

  Run Build() {
    WarmUp();
    for (int round = 0; round < 2 * m_ && run_.ok; ++round) SteadyRound();
    for (int i = 0; i < p_ && run_.ok; ++i) {
      while (!pending_w_[i].empty()) PutW(i);
    }
    for (int i = 0; i < p_; ++i) {
      run_.max_span = std::max(run_.max_span, now_[i] - first_[i]);
      run_.max_idle = std::max(run_.max_idle, run_.idle[i]);
    }
    return run_;
  }

 private:
  // The input of pass k of stage i for microbatch mb: its producer's end (+ comm across
  // stages); nullopt when it comes from no other stage's pass (stage 0's chunk-0 F).
  // -1 when the producer is not placed yet.
  std::optional<double> Input(int i, int k, int mb) const {
    switch (k) {
      case kF0:
        if (i == 0) return std::nullopt;
        return Arrival(end_[kF0][i - 1][mb]);
      case kF1:
        if (i == p_ - 1) return end_[kF0][i][mb];  // the V's tip: same stage
        return Arrival(end_[kF1][i + 1][mb]);
      case kBDown:
        if (i == 0) return end_[kF1][0][mb];  // the loss: same stage
        return Arrival(end_[kBDown][i - 1][mb]);
      case kBUp:
        if (i == p_ - 1) return end_[kBDown][i][mb];  // the tip on the way back: same stage
        return Arrival(end_[kBUp][i + 1][mb]);
      default:
        return std::nullopt;
    }
  }
  double Arrival(double end) const { return end < 0 ? -1.0 : end + comm_; }
  // Only inputs from another stage count as "the dependency arrives" for the W fills.
  std::optional<double> CrossInput(int i, int k, int mb) const {
    if ((k == kF0 && i == 0) || (k == kF1 && i == p_ - 1) || (k == kBDown && i == 0) ||
        (k == kBUp && i == p_ - 1)) {
      return std::nullopt;
    }
    return Input(i, k, mb);
  }

  double Cost(int k) const { return k <= kF1 ? f_ : (k <= kBUp ? b_ : w_); }

  void Put(int i, int k) {
    if (!run_.ok) return;
    const int mb = count_[i][k];
    if (mb >= m_) {
      run_.ok = false;
      return;
    }
    double start = now_[i];
    const std::optional<double> in = Input(i, k, mb);
    if (in) {
      if (*in < 0) {  // its producer is not placed: the order is not executable
        run_.ok = false;
        return;
      }
      start = std::max(start, *in);
    }
    if (first_[i] < 0) {
      first_[i] = start;
    } else {
      run_.idle[i] += start - now_[i];
    }
    now_[i] = start + Cost(k);
    if (k <= kBUp) end_[k][i][mb] = now_[i];
    if (k <= kF1) mem_[i] += 1;
    if (k >= kW0) mem_[i] -= 1;
    run_.peak = std::max(run_.peak, mem_[i]);
    ++count_[i][k];
    if (k == kBDown) pending_w_[i].push_back(kW1);
    if (k == kBUp) pending_w_[i].push_back(kW0);
    const int chunk1_stage = 2 * p_ - 1 - i;
    const int stage = (k == kF0 || k == kBUp || k == kW0) ? i : chunk1_stage;
    const ActionKind kind =
        k <= kF1 ? ActionKind::kF : (k <= kBUp ? ActionKind::kB : ActionKind::kW);
    run_.order[i].push_back(Action{kind, stage, mb});
  }

  void PutW(int i) {
    const int k = pending_w_[i].front();
    pending_w_[i].pop_front();
    Put(i, k);
  }

  double Budget(int i) const {
    double most = 0;
    for (double x : run_.idle) most = std::max(most, x);
    if (approved_ != nullptr) most = std::max(most, max_approved_ - (*approved_)[i]);
    return most - run_.idle[i];
  }

  // W's that end before the pass's input arrives; then one more if `extra` and the gap left
  // exceeds the budget.
  void FillW(int i, int k, bool extra) {
    const std::optional<double> in = CrossInput(i, k, count_[i][k]);
    if (!in || *in < 0) return;
    while (run_.ok && !pending_w_[i].empty() && *in >= now_[i] + w_) PutW(i);
    if (run_.ok && extra && !pending_w_[i].empty() && *in - now_[i] > Budget(i)) PutW(i);
  }

  int Issued(int i) const { return count_[i][kF0] + count_[i][kF1]; }

  void WarmUp() {
    for (int i = 0; i < p_; ++i) Put(i, kF0);
    for (int i = p_ - 1; i >= 0 && run_.ok; --i) {
      if (i < p_ - 1) {
        const double arrives = end_[kF1][i + 1][0] + comm_;
        while (run_.ok && mem_[i] + (2 + 2 * i) <= cap_ && now_[i] + f_ <= arrives &&
               count_[i][kF0] < m_) {
          for (int j = 0; j <= i; ++j) Put(j, kF0);
        }
      }
      Put(i, kF1);
    }
    int chunk = kF0;
    for (int i = 1; i < p_ && run_.ok; ++i) {
      int stalled = 0;
      while (run_.ok && (Issued(i) < Issued(i - 1) ||
                         (count_[i][kF1] <= count_[i - 1][kF1] && count_[i - 1][kF1] < m_))) {
        bool put = false;
        for (int j = p_ - 1; j >= i; --j) {
          if (count_[j][chunk] < m_) {
            Put(j, chunk);
            put = true;
          }
        }
        chunk = 1 - chunk;
        stalled = put ? 0 : stalled + 1;
        if (stalled >= 2) run_.ok = false;
      }
    }
  }

  void SteadyRound() {
    // No W frees memory a B needs (B holds what it had): nothing to do before the B's.
    std::vector<int> down, up;
    for (int i = 0; i < p_; ++i) {
      if (count_[i][kBUp] >= count_[i][kBDown]) {
        down.push_back(i);
      } else if (i == p_ - 1 || end_[kBUp][i + 1][count_[i][kBUp]] >= 0 ||
                 count_[i][kBDown] >= m_) {
        up.push_back(i);
      } else {
        down.push_back(i);
      }
    }
    std::vector<std::pair<int, int>> bs;
    for (auto it = up.rbegin(); it != up.rend(); ++it) bs.push_back({*it, kBUp});
    for (int i : down) bs.push_back({i, kBDown});
    for (const auto& entry : bs) {
      const int i = entry.first, k = entry.second;
      if (count_[i][k] >= m_) continue;
      FillW(i, k, k == kBUp || fill_b_);
      Put(i, k);
    }
    for (int i = 0; i < p_ && run_.ok; ++i) {
      if (count_[i][kF1] >= m_) continue;
      int k = -1;
      if (count_[i][kF1] >= count_[i][kF0]) {
        k = kF0;
      } else if (i == p_ - 1 || end_[kF1][i + 1][count_[i][kF1]] >= 0) {
        k = kF1;
      } else if (count_[i][kF0] < m_ && (i == 0 || end_[kF0][i - 1][count_[i][kF0]] >= 0)) {
        k = kF0;
      }
      if (k < 0) continue;
      while (run_.ok && mem_[i] + 1 > cap_) {
        if (pending_w_[i].empty()) {
          run_.ok = false;
          return;
        }
        PutW(i);
      }
      FillW(i, k, fill_f_);
      Put(i, k);
    }
  }

  const int p_, m_;
  const double f_, b_, w_, comm_;
  const bool fill_b_, fill_f_;
  const std::vector<double>* approved_;
  const double cap_;
  double max_approved_ = 0;
  std::vector<std::vector<int>> count_;
  std::vector<std::vector<std::vector<double>>> end_;  // [pass F0..BUp][stage][mb]
  std::vector<double> now_, first_, mem_;
  std::vector<std::deque<int>> pending_w_;
  Run run_;
};

}  // namespace

AuthorsZbvPlan AuthorsZbvSchedule(int p, int m, double f, double b, double w, double comm) {
  std::optional<Run> best;
  for (bool fill_b : {true, false}) {
    for (bool fill_f : {true, false}) {
      Run run = ZbvBuilder(p, m, f, b, w, comm, fill_b, fill_f, nullptr).Build();
      if (!run.ok) continue;
      // Refinement: each stage's idle time becomes its approved bubble while the largest idle
      // shrinks (bounded; it stops within a few rounds on the grid).
      for (int round = 0; round < 64; ++round) {
        Run next = ZbvBuilder(p, m, f, b, w, comm, fill_b, fill_f, &run.idle).Build();
        if (!next.ok || next.max_idle >= run.max_idle) break;
        run = std::move(next);
      }
      if (!best || run.max_idle < best->max_idle) best = std::move(run);
    }
  }
  AuthorsZbvPlan out;
  if (!best) return out;
  out.ok = true;
  out.order = std::move(best->order);
  out.max_span = best->max_span;
  out.bubble = 1.0 - 2.0 * m * (f + b + w) / best->max_span;
  out.peak_units = best->peak / 2.0;
  return out;
}

}  // namespace pipetrain::schedule::testing
