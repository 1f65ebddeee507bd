#include "schedule/shared_core_simulator.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "schedule/engine.h"

namespace pipetrain::schedule {
namespace {

constexpr double kUnknown = -1.0;
constexpr double kInf = std::numeric_limits<double>::infinity();

double ComputeCost(const StageCost& c, ActionKind kind) {
  switch (kind) {
    case ActionKind::kF:
    case ActionKind::kOverlapF:
      return c.f;
    case ActionKind::kB:
      return c.b;
    case ActionKind::kW:
      return c.w;
    default:
      return c.FusedBackward();
  }
}

}  // namespace

absl::StatusOr<double> SimulateSharedCores(const Schedule& s, const CostModel& costs,
                                           const CoreSharing& sharing) {
  const int p = s.num_workers, n_stages = s.num_stages, m = s.num_microbatches;
  if (static_cast<int>(sharing.host_of_worker.size()) != p ||
      static_cast<int>(sharing.threads_of_worker.size()) != p ||
      static_cast<int>(costs.stages.size()) != n_stages ||
      static_cast<int>(s.worker_actions.size()) != p) {
    return absl::InvalidArgumentError("SimulateSharedCores: sizes do not match the schedule");
  }
  for (int w = 0; w < p; ++w) {
    const int h = sharing.host_of_worker[w];
    if (h >= static_cast<int>(sharing.host_cores.size()) ||
        (h >= 0 && !(sharing.host_cores[h] > 0)) || sharing.threads_of_worker[w] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("SimulateSharedCores: bad host/threads of "
                       "worker ",
                       w));
    }
  }
  const bool explicit_transfers = ScanActions(s).HasTransfers();
  auto key = [m](int stage, int mb) { return static_cast<size_t>(stage) * m + mb; };
  const size_t keys = static_cast<size_t>(n_stages) * m;
  // End of F and of the backward (B or BW) of each (stage, microbatch); arrival of each message.
  std::vector<double> f_end(keys, kUnknown), bwd_end(keys, kUnknown);
  std::vector<double> act_arrival(keys, kUnknown), grad_arrival(keys, kUnknown);

  std::vector<size_t> next(p, 0);
  std::vector<double> remaining(p, 0.0);  // work left of the running compute (full-speed seconds)
  std::vector<bool> running(p, false);
  std::vector<double> ready_at(p, kUnknown);  // a blocked worker's known wake-up time
  double now = 0.0, end = 0.0;

  // Time at which `a` may start on its worker, kUnknown while a producer has not run.
  auto start_time = [&](const Action& a) -> double {
    const int st = a.stage, i = a.microbatch;
    const int w = s.stage_to_worker[st];
    double t = 0.0;
    auto need = [&](double produced, int producer_stage) {
      if (produced < 0 || t < 0) {
        t = kUnknown;
        return;
      }
      const bool cross = s.stage_to_worker[producer_stage] != w;
      t = std::max(t, produced + (cross && !explicit_transfers ? costs.comm : 0.0));
    };
    switch (a.kind) {
      case ActionKind::kF:
      case ActionKind::kOverlapF:
        if (st > 0) need(f_end[key(st - 1, i)], st - 1);
        break;
      case ActionKind::kB:
      case ActionKind::kBW:
        need(f_end[key(st, i)], st);
        if (st + 1 < n_stages) need(bwd_end[key(st + 1, i)], st + 1);
        break;
      case ActionKind::kW:
        need(bwd_end[key(st, i)], st);
        break;
      case ActionKind::kSendAct:
        need(f_end[key(st, i)], st);
        break;
      case ActionKind::kSendGrad:
        need(bwd_end[key(st, i)], st);
        break;
      case ActionKind::kRecvAct:
        t = act_arrival[key(st, i)];
        break;
      case ActionKind::kRecvGrad:
        t = grad_arrival[key(st, i)];
        break;
      case ActionKind::kOffload:
      case ActionKind::kReload:
      case ActionKind::kRelease:
        break;
    }
    return t;
  };

  while (true) {
    // Start what can start now; instant actions (transfers, copies) complete at once and may
    // unblock a worker visited before, so sweep until nothing moves.
    bool all_done = true, moved = true;
    while (moved) {
      moved = false;
      all_done = true;
      for (int w = 0; w < p; ++w) {
        const std::vector<Action>& list = s.worker_actions[w];
        ready_at[w] = kUnknown;
        while (!running[w] && next[w] < list.size()) {
          const Action& a = list[next[w]];
          const double t = start_time(a);
          if (t < 0 || t > now + 1e-12 * std::max(1.0, now)) {
            ready_at[w] = t;
            break;
          }
          moved = true;
          if (IsCompute(a.kind)) {
            running[w] = true;
            remaining[w] = ComputeCost(costs.stages[a.stage], a.kind);
            break;
          }
          if (a.kind == ActionKind::kSendAct && a.stage + 1 < n_stages) {
            act_arrival[key(a.stage + 1, a.microbatch)] = now + costs.comm;
          } else if (a.kind == ActionKind::kSendGrad && a.stage > 0) {
            grad_arrival[key(a.stage - 1, a.microbatch)] = now + costs.comm;
          }
          ++next[w];
        }
        all_done &= !running[w] && next[w] == list.size();
      }
    }
    if (all_done) break;
    // Speeds: fair sharing of each host's cores among its running compute threads.
    std::vector<double> demand(sharing.host_cores.size(), 0.0);
    for (int w = 0; w < p; ++w) {
      if (running[w] && sharing.host_of_worker[w] >= 0) {
        demand[sharing.host_of_worker[w]] += sharing.threads_of_worker[w];
      }
    }
    auto speed = [&](int w) {
      const int h = sharing.host_of_worker[w];
      if (h < 0) return 1.0;
      return std::min(1.0, sharing.host_cores[h] / demand[h]);
    };
    double step = kInf;
    for (int w = 0; w < p; ++w) {
      if (running[w]) step = std::min(step, remaining[w] / speed(w));
      if (!running[w] && ready_at[w] > now) step = std::min(step, ready_at[w] - now);
    }
    if (step == kInf) {
      return absl::FailedPreconditionError(
          absl::StrCat("SimulateSharedCores: the schedule deadlocks at t = ", now));
    }
    // Finish the computes that end at now + step (within rounding).
    const double after = now + step;
    for (int w = 0; w < p; ++w) {
      if (!running[w]) continue;
      remaining[w] -= step * speed(w);
      if (remaining[w] > 1e-12 * std::max(1.0, after)) continue;
      const Action& a = s.worker_actions[w][next[w]];
      const size_t k = key(a.stage, a.microbatch);
      if (IsForward(a.kind)) f_end[k] = after;
      if (a.kind == ActionKind::kB || a.kind == ActionKind::kBW) bwd_end[k] = after;
      running[w] = false;
      ++next[w];
      end = after;
    }
    now = after;
  }
  return end;
}

}  // namespace pipetrain::schedule
