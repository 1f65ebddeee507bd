// ZB-H1 / ZB-H2: a list scheduler over simulated time with B and W split (see
// generators_classic.h for limits). Workers are processed in time order (a tournament tree), so
// every decision at time t sees exactly the inputs that have arrived by t. Cost: O(p*m log p).
// Whenever a worker is free at time t it picks:
//   1. its next B if the gradient input has arrived by t;
//   2. its next F if the activation input has arrived and the memory limit allows it;
//   3. a pending W if the next F is held back only by memory (W frees it);
//   4. a pending W if it fits before the next known input arrives (fills the bubble);
//   5. otherwise it waits for the next arrival.
// Ordered mode (zb-h1) restricts 1 and 2 to 1F1B's F/B order (warm-up forwards, then F and B
// alternate), which with unit costs gives exactly the paper's ZB-H1 bubble
// (p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W)) for m >= p. With transfer costs 1F1B's warm-up depth
// (p-1-w) leaves the backward wave waiting for forwards, so zb-h1 also tries the depth that
// timing asks for (as many forwards as end before the first backward can arrive, within the
// cap) and keeps it only when it is strictly shorter at no more peak (p = 16, m = 16, unit
// costs, transfer 0.1: span 68.8 -> 66, the zero-bubble authors' figure). Free mode (zb-h2)
// lets B jump ahead and F run as deep as the 2p limit allows; with unit costs its bubble is 0
// for m >= 2p.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/generators_classic.h"

namespace pipetrain::schedule {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct WorkerState {
  double free = 0.0;
  int next_f = 0, next_b = 0, next_w = 0;
  double held = 0.0;
  double wake = 0.0;  // when it next wakes (its entry in the WakeTree); kInf while asleep
};

// Min over workers' wake times (ties: lower worker), O(log p) update: a tournament tree.
class WakeTree {
 public:
  explicit WakeTree(int n) {
    while (size_ < n) size_ *= 2;
    node_.assign(2 * size_, {kInf, 0});
    for (int i = 0; i < size_; ++i) node_[size_ + i] = {kInf, i};
    for (int i = size_ - 1; i >= 1; --i) node_[i] = std::min(node_[2 * i], node_[2 * i + 1]);
  }
  void Set(int w, double t) {
    int i = size_ + w;
    node_[i].first = t;
    for (i /= 2; i >= 1; i /= 2) node_[i] = std::min(node_[2 * i], node_[2 * i + 1]);
  }
  double MinTime() const { return node_[1].first; }
  int MinWorker() const { return node_[1].second; }

 private:
  int size_ = 1;
  std::vector<std::pair<double, int>> node_;
};

// One list-scheduled plan with the times the scheduler gave it (ASAP: every action starts when
// its worker is free and its input has arrived, as Simulate times it).
struct ZbPlan {
  Schedule schedule;
  double makespan = 0.0;  // the last end
  double peak = 0.0;      // the most any worker held
};

// `warmup` (ordered mode only): per worker, the forwards before F and B alternate. Returns
// nullopt (no error) once an action would end after `give_up_after`: a candidate that cannot
// win is not finished.
absl::StatusOr<std::optional<ZbPlan>> ListSchedule(const CostModel& costs, int p, int m,
                                                   const char* name, double limit, bool ordered,
                                                   const std::vector<int>& warmup,
                                                   double give_up_after) {
  Schedule s = MakeEmptySchedule(name, p, m, LoopPlacement(p, 1));
  double makespan = 0.0, peak = 0.0;
  std::vector<double> f_end(static_cast<size_t>(p) * m, kInf), b_end(f_end);
  // Microbatch-major so a worker and its neighbours read adjacent entries.
  auto at = [p](int w, int i) { return static_cast<size_t>(i) * p + w; };
  std::vector<WorkerState> st(p);
  WakeTree tree(p);
  auto push = [&](int w, double t) {
    WorkerState& ws = st[w];
    t = std::max(t, ws.free);
    if (t >= ws.wake && ws.wake != kInf) return;  // it wakes earlier already
    ws.wake = t;
    tree.Set(w, t);
  };
  for (int w = 0; w < p; ++w) {
    st[w].wake = kInf;
    push(w, 0.0);
  }
  const double comm = costs.comm;
  while (tree.MinTime() != kInf) {
    const int w = tree.MinWorker();
    const double t = tree.MinTime();
    WorkerState& ws = st[w];
    tree.Set(w, kInf);
    ws.wake = kInf;
    if (ws.next_w == m) continue;
    const StageCost& c = costs.stages[w];
    // Input arrival times (kInf = producer not scheduled yet).
    double b_ready = kInf, f_ready = kInf;
    if (ws.next_b < ws.next_f) {
      b_ready = w == p - 1 ? f_end[at(w, ws.next_b)] : b_end[at(w + 1, ws.next_b)] + comm;
    }
    const bool more_f = ws.next_f < m;
    if (more_f) f_ready = w == 0 ? 0.0 : f_end[at(w - 1, ws.next_f)] + comm;
    const bool f_fits = ws.held + c.activation <= limit + 1e-9;
    const bool w_pending = ws.next_w < ws.next_b;
    // Ordered mode keeps 1F1B's F/B order: `warmup[w]` forwards, then F and B alternate.
    if (ordered) {
      const bool want_b =
          ws.next_b < m && (ws.next_f == m || ws.next_f >= warmup[w] + ws.next_b + 1);
      if (want_b) {
        f_ready = kInf;
      } else {
        b_ready = kInf;
      }
    }
    ActionKind kind;
    if (b_ready <= t) {
      kind = ActionKind::kB;
    } else if (more_f && f_fits && f_ready <= t) {
      kind = ActionKind::kF;
    } else if (w_pending && more_f && !f_fits && f_ready <= t) {
      kind = ActionKind::kW;
    } else {
      const double next_input = std::min(b_ready, f_fits ? f_ready : kInf);
      // (Tolerance: a W that ends exactly at the arrival fits, whatever the rounding.)
      if (w_pending && (next_input == kInf || t + c.w <= next_input + 1e-9)) {
        kind = ActionKind::kW;
      } else if (next_input != kInf) {
        push(w, next_input);
        continue;
      } else if (w_pending) {
        kind = ActionKind::kW;  // memory-blocked with the input not even produced yet
      } else {
        continue;  // asleep until a neighbour schedules the producer
      }
    }
    const double start = std::max(t, ws.free);
    double end = start;
    int mb = 0;
    switch (kind) {
      case ActionKind::kB:
        mb = ws.next_b++;
        end = start + c.b;
        b_end[at(w, mb)] = end;
        ws.held -= c.freed_by_b;
        if (w > 0) push(w - 1, end + comm);
        break;
      case ActionKind::kF:
        mb = ws.next_f++;
        end = start + c.f;
        f_end[at(w, mb)] = end;
        ws.held += c.activation;
        if (w + 1 < p) push(w + 1, end + comm);
        break;
      default:
        mb = ws.next_w++;
        end = start + c.w;
        ws.held -= c.activation - c.freed_by_b;
        break;
    }
    s.worker_actions[w].push_back({kind, w, mb});
    if (end > give_up_after) return std::optional<ZbPlan>();
    makespan = std::max(makespan, end);
    peak = std::max(peak, ws.held);
    ws.free = end;
    push(w, end);
  }
  for (int w = 0; w < p; ++w) {
    if (st[w].next_w != m) {
      return absl::InternalError(absl::StrCat(name, ": greedy stalled on worker ", w));
    }
  }
  return std::optional<ZbPlan>(ZbPlan{std::move(s), makespan, peak});
}

absl::StatusOr<Schedule> MakeZb(const PipelineSpec& spec, const char* name, int limit_factor,
                                bool ordered) {
  const int p = spec.num_workers, m = spec.num_microbatches;
  const CostModel costs = CostModelFor(spec, 1);
  if (static_cast<int>(costs.stages.size()) != p) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage_costs has ", costs.stages.size(), " entries; ", name, " needs ", p));
  }
  const double limit = spec.memory_limit > 0 ? spec.memory_limit : limit_factor * p;
  for (int w = 0; w < p; ++w) {
    if (costs.stages[w].activation > limit + 1e-9) {
      return absl::ResourceExhaustedError(absl::StrCat(
          name, ": memory_limit ", limit, " units is below one microbatch's activations (",
          costs.stages[w].activation, " units) on worker ", w));
    }
  }
  // Warm-up depth for ordered mode: as many forwards as the limit leaves room for, less one per
  // worker downstream (1F1B's p-1-w at the 1F1B limit of p units).
  std::vector<int> warmup(p), timed(p);
  for (int w = 0; w < p; ++w) {
    const int fit = static_cast<int>(std::floor(limit / costs.stages[w].activation + 1e-9));
    warmup[w] = std::clamp(fit - 1 - w, 0, m);
    // The timed depth: the forwards (arriving back to back from worker 0) that end before
    // microbatch 0's B can start here, after its forward chain down and backward chain back.
    double f_chain = 0.0, b_chain = 0.0;
    for (int j = 0; j < w; ++j) f_chain += costs.stages[j].f + costs.comm;
    double b_start = f_chain;
    for (int j = w; j < p; ++j) b_start += costs.stages[j].f + (j + 1 < p ? costs.comm : 0.0);
    for (int j = w + 1; j < p; ++j) b_chain += costs.stages[j].b + costs.comm;
    b_start += b_chain;
    const double f = costs.stages[w].f;
    const int arrive = f > 0 ? static_cast<int>(std::floor((b_start - f_chain) / f + 1e-9)) : m;
    timed[w] = std::clamp(std::min(arrive, fit) - 1, 0, m);
  }
  PT_ASSIGN_OR_RETURN(std::optional<ZbPlan> plan,
                      ListSchedule(costs, p, m, name, limit, ordered, warmup,
                                   std::numeric_limits<double>::infinity()));
  if (ordered && timed != warmup) {
    PT_ASSIGN_OR_RETURN(std::optional<ZbPlan> other,
                        ListSchedule(costs, p, m, name, limit, ordered, timed,
                                     plan->makespan - 1e-9));
    if (other && other->makespan < plan->makespan - 1e-9 && other->peak <= plan->peak + 1e-9) {
      plan = std::move(other);
    }
  }
  return std::move(plan->schedule);
}

}  // namespace

absl::StatusOr<Schedule> MakeZbH1(const PipelineSpec& spec) {
  return MakeZb(spec, "zb-h1", 1, true);
}
absl::StatusOr<Schedule> MakeZbH2(const PipelineSpec& spec) {
  return MakeZb(spec, "zb-h2", 2, false);
}

}  // namespace pipetrain::schedule
