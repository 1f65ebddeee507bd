#include "tests/schedule_zb/authors_zbh1_baseline.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace pipetrain::schedule::testing {
namespace {

struct Variant {
  bool allow_bubble_before_first_b, prioritize_b, no_bubble_greedy;
};

class ZbH1Builder {
 public:
  ZbH1Builder(int p, int m, double f, double b, double w, double comm, Variant v)
      : p_(p),
        m_(m),
        f_(f),
        b_(b),
        w_(w),
        c_(comm),
        v_(v),
        cap_(p),
        next_f_(p, 0),
        next_b_(p, 0),
        end_(p, 0.0),
        mem_(p, 0.0),
        bubble_(p, 0.0),
        started_(p, false),
        first_(p, 0.0),
        pending_(p),
        tf_(p, std::vector<double>(m, -1)),
        tb_(p, std::vector<double>(m, -1)),
        order_(p) {}

  // Returns false when a W is needed for memory and none is pending ("cannot fit memory").
  bool Run() {
    for (int i = 0; i < m_; ++i) {
      if (i == 0) {
        for (int j = 0; j < p_; ++j) Put(j, ActionKind::kF);
        std::vector<int> extra(p_, 0);
        double last_t = end_[p_ - 1] + b_;  // B(p-1, 0) right after its F
        for (int j = p_ - 2; j >= 0; --j) {
          int k = 0;
          while (next_f_[j] + k < m_ && mem_[j] + k + 1 <= cap_ + 1e-9) {
            const double start = end_[j] + k * f_;
            const bool fits = v_.allow_bubble_before_first_b ? start + f_ <= last_t + c_ + 1e-9
                                                             : start < last_t + c_ - 1e-9;
            if (!fits) break;
            ++k;
          }
          extra[j] = k;
          last_t = std::max(end_[j] + k * f_, last_t + c_) + b_;
        }
        for (int j = 1; j < p_; ++j) {
          while (extra[j] > 0 && extra[j] >= extra[j - 1]) --extra[j];
        }
        for (int j = 0; j < p_; ++j) {
          for (int k = 0; k < extra[j]; ++k) Put(j, ActionKind::kF);
        }
        for (int j = p_ - 1; j >= 0; --j) Put(j, ActionKind::kB);
        continue;
      }
      std::vector<int> need(p_, 0);
      for (int j = 0; j < p_; ++j) {
        if (next_f_[j] >= m_) continue;
        need[j] = 1;
        if (v_.prioritize_b && j + 1 < p_ && next_f_[j] - next_f_[j + 1] >= 2) {
          const double x = end_[j + 1] + f_ + b_ + c_;
          const int forced = std::max(0, static_cast<int>(mem_[j] + 1 - cap_ + 1e-9));
          if (end_[j] >= x - 1e-9) {
            need[j] = 0;
          } else if (end_[j] + f_ + forced * w_ <= x + 1e-9) {
            need[j] = 1;
          } else if (x - end_[j] <= Budget(j) + 1e-9) {
            need[j] = 0;
          }
        }
      }
      for (int j = p_ - 2; j >= 0; --j) need[j] = std::min(need[j], need[j + 1]);
      for (int j = 0; j < p_; ++j) {
        if (!need[j]) continue;
        while (mem_[j] + 1 > cap_ + 1e-9) {
          if (pending_[j].empty()) return false;
          Put(j, ActionKind::kW);
        }
        const double arrival = j > 0 ? tf_[j - 1][next_f_[j]] + c_ : 0.0;
        FillW(j, arrival, /*always_extra=*/v_.no_bubble_greedy);
        Put(j, ActionKind::kF);
      }
      for (int j = p_ - 1; j >= 0; --j) {
        if (next_b_[j] >= m_) continue;
        if (j == 0 && next_f_[0] >= m_) {
          while (!pending_[0].empty()) Put(0, ActionKind::kW);
        }
        const int mb = next_b_[j];
        const double arrival = j + 1 < p_ ? tb_[j + 1][mb] + c_ : tf_[j][mb];
        if (arrival < 0) return false;  // its input was never produced (a broken variant)
        FillW(j, arrival, /*always_extra=*/v_.no_bubble_greedy);
        Put(j, ActionKind::kB);
      }
    }
    for (int j = 0; j < p_; ++j) {
      while (!pending_[j].empty()) Put(j, ActionKind::kW);
    }
    return true;
  }

  double MaxSpan() const {
    double span = 0;
    for (int j = 0; j < p_; ++j) span = std::max(span, end_[j] - first_[j]);
    return span;
  }
  double Peak() const { return peak_; }
  std::vector<std::vector<Action>> TakeOrder() { return std::move(order_); }

 private:
  double Budget(int j) const {
    return *std::max_element(bubble_.begin(), bubble_.end()) - bubble_[j];
  }

  // W's while one ends by `arrival`; then, if idle is left before it, one more W when the gap
  // exceeds the budget or `always_extra`.
  void FillW(int j, double arrival, bool always_extra) {
    while (!pending_[j].empty() && end_[j] + w_ <= arrival + 1e-9) Put(j, ActionKind::kW);
    if (pending_[j].empty() || end_[j] >= arrival - 1e-9) return;
    const double gap = arrival - end_[j];
    if (gap > Budget(j) + 1e-9 || always_extra) Put(j, ActionKind::kW);
  }

  void Put(int j, ActionKind kind) {
    double ready = 0, cost = 0;
    int mb = 0;
    switch (kind) {
      case ActionKind::kF:
        mb = next_f_[j]++;
        ready = j > 0 ? tf_[j - 1][mb] + c_ : 0.0;
        cost = f_;
        break;
      case ActionKind::kB:
        mb = next_b_[j]++;
        ready = j + 1 < p_ ? tb_[j + 1][mb] + c_ : tf_[j][mb];
        cost = b_;
        break;
      default:
        mb = pending_[j].front();
        pending_[j].pop_front();
        cost = w_;
        break;
    }
    const double start = std::max(end_[j], ready);
    if (started_[j]) bubble_[j] += start - end_[j];
    if (!started_[j]) first_[j] = start;
    started_[j] = true;
    end_[j] = start + cost;
    if (kind == ActionKind::kF) {
      tf_[j][mb] = end_[j];
      mem_[j] += 1;
      peak_ = std::max(peak_, mem_[j]);
    } else if (kind == ActionKind::kB) {
      tb_[j][mb] = end_[j];
      pending_[j].push_back(mb);
    } else {
      mem_[j] -= 1;
    }
    order_[j].push_back({kind, j, mb});
  }

  const int p_, m_;
  const double f_, b_, w_, c_;
  const Variant v_;
  const double cap_;
  std::vector<int> next_f_, next_b_;
  std::vector<double> end_, mem_, bubble_;
  std::vector<bool> started_;
  std::vector<double> first_;
  std::vector<std::deque<int>> pending_;
  std::vector<std::vector<double>> tf_, tb_;
  std::vector<std::vector<Action>> order_;
  double peak_ = 0;
};

}  // namespace

AuthorsZbPlan AuthorsZbH1Schedule(int p, int m, double f, double b, double w, double comm) {
  AuthorsZbPlan best;
  best.max_span = std::numeric_limits<double>::infinity();
  for (int bits = 0; bits < 8; ++bits) {
    const Variant v{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
    ZbH1Builder builder(p, m, f, b, w, comm, v);
    if (!builder.Run()) continue;
    const double span = builder.MaxSpan();
    if (span < best.max_span - 1e-9) {
      best.max_span = span;
      best.peak_units = builder.Peak();
      best.order = builder.TakeOrder();
    }
  }
  best.bubble = 1 - m * (f + b + w) / best.max_span;
  return best;
}

}  // namespace pipetrain::schedule::testing
