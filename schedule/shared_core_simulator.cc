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

bool IsWeightGradient(ActionKind kind) { return kind == ActionKind::kW || kind == ActionKind::kBW; }

}  // namespace

absl::StatusOr<double> SimulateSharedCores(const Schedule& s, const CostModel& costs,
                                           const CoreSharing& sharing,
                                           const ReplicaSums& replicas,
                                           const StepCpuWork& cpu_work) {
  const int p = s.num_workers, n_stages = s.num_stages, m = s.num_microbatches;
  const int d = replicas.replicas;
  if (d < 1 || static_cast<int>(s.worker_actions.size()) != p ||
      static_cast<int>(costs.stages.size()) != n_stages ||
      (d > 1 && static_cast<int>(replicas.stage_allreduce_s.size()) != n_stages)) {
    return absl::InvalidArgumentError("SimulateSharedCores: sizes do not match the schedule");
  }
  const int n = d * p;  // workers of every replica, job rank q * p + w
  for (const std::vector<double>* times :
       {&cpu_work.stage_sum_cpu_s, &cpu_work.stage_optimizer_cpu_s}) {
    if (!times->empty() && static_cast<int>(times->size()) != n_stages) {
      return absl::InvalidArgumentError(absl::StrCat("SimulateSharedCores: ", times->size(),
                                                     " CPU times for ", n_stages, " stages"));
    }
    for (double t : *times) {
      if (!(t >= 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("SimulateSharedCores: a step CPU time of ", t, " s"));
      }
    }
  }
  if (!(cpu_work.message_cpu_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SimulateSharedCores: a message CPU time of ", cpu_work.message_cpu_s, " s"));
  }
  auto sum_cpu = [&](int st) {
    return d > 1 && !cpu_work.stage_sum_cpu_s.empty() ? cpu_work.stage_sum_cpu_s[st] : 0.0;
  };
  // Each worker's optimizer step: the CPU time of the stages it holds.
  std::vector<double> optimizer_cpu(p, 0.0);
  if (!cpu_work.stage_optimizer_cpu_s.empty()) {
    for (int st = 0; st < n_stages; ++st) {
      optimizer_cpu[s.stage_to_worker[st]] += cpu_work.stage_optimizer_cpu_s[st];
    }
  }
  if (static_cast<int>(sharing.host_of_worker.size()) != n ||
      static_cast<int>(sharing.threads_of_worker.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SimulateSharedCores: ", sharing.host_of_worker.size(), " hosts and ",
        sharing.threads_of_worker.size(), " thread counts for ", d, " x ", p, " workers"));
  }
  for (int w = 0; w < n; ++w) {
    const int h = sharing.host_of_worker[w];
    if (h >= static_cast<int>(sharing.host_cores.size()) ||
        (h >= 0 && !(sharing.host_cores[h] > 0)) || sharing.threads_of_worker[w] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("SimulateSharedCores: bad host/threads of "
                       "worker ",
                       w));
    }
  }
  // Data parallelism: after which action of its worker's list each stage's gradients are summed
  // (the last W or BW of the stage, as the executor does), and one hop of each stage's sum.
  std::vector<size_t> reduce_after(n_stages, 0);
  std::vector<double> hop(n_stages, 0.0);
  if (d > 1) {
    for (int st = 0; st < n_stages; ++st) {
      const int w = s.stage_to_worker[st];
      const std::vector<Action>& list = s.worker_actions[w];
      size_t i = list.size();
      while (i-- > 0 && !(list[i].stage == st && IsWeightGradient(list[i].kind))) {
      }
      if (i >= list.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage ", st, " has no weight-gradient action to sum after"));
      }
      if (!(replicas.stage_allreduce_s[st] >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat("SimulateSharedCores: stage ", st,
                                                       "'s gradient sum takes ",
                                                       replicas.stage_allreduce_s[st], " s"));
      }
      reduce_after[st] = i;
      hop[st] = replicas.stage_allreduce_s[st] / (2.0 * (d - 1));
    }
  }
  const bool explicit_transfers = ScanActions(s).HasTransfers();
  const size_t keys = static_cast<size_t>(n_stages) * m;
  auto key = [m, keys](int q, int stage, int mb) {
    return q * keys + static_cast<size_t>(stage) * m + mb;
  };
  // Per replica: end of F and of the backward (B or BW) of each (stage, microbatch); arrival of
  // each message.
  std::vector<double> f_end(d * keys, kUnknown), bwd_end(d * keys, kUnknown);
  std::vector<double> act_arrival(d * keys, kUnknown), grad_arrival(d * keys, kUnknown);
  // Gradient sums: when replica q's running sum of a stage arrives from replica q - 1, and when
  // the complete sum arrives at the replicas before the last.
  std::vector<double> sum_arrival(static_cast<size_t>(d) * n_stages, kUnknown);
  double complete_arrival = 0.0;
  // When replica d - 1 sent each stage's complete sum (kUnknown before).
  std::vector<double> complete_sent(n_stages, kUnknown);
  // A worker of replica q > 0 whose stage's sum it waits for before its next action (-1: none).
  std::vector<int> awaiting_sum(n, -1);
  // Messages whose CPU work (cpu_work.message_cpu_s) runs on their sender's host; each sets its
  // arrival slot when that work ends (no earlier than its link time).
  struct MessageWork {
    int host;
    double remaining;  // full-speed seconds
    std::vector<double>* arrivals;
    size_t slot;
    double earliest;  // send + link time
  };
  std::vector<MessageWork> messages;

  std::vector<size_t> next(n, 0);
  std::vector<double> remaining(n, 0.0);  // work left of the running compute (full-speed seconds)
  std::vector<bool> running(n, false);
  std::vector<double> ready_at(n, kUnknown);  // a blocked worker's known wake-up time
  // The step's CPU work besides F, B and W (cpu_work): what a worker runs now or runs next
  // before its next action: the sum work of a stage (stage >= 0) or its optimizer step (-1).
  constexpr int kOptimizer = -1, kNoWork = -2;
  std::vector<int> running_work(n, kNoWork), queued_sum(n, kNoWork);
  std::vector<bool> optimizer_done(n, false);
  for (int v = 0; v < n; ++v) optimizer_done[v] = !(optimizer_cpu[v % p] > 0);
  // When worker v of replica q may run its optimizer step: its stages' gradients are final.
  auto optimizer_ready = [&](int q, int w) -> double {
    double t = 0.0;
    if (d == 1) return t;
    for (int st = 0; st < n_stages; ++st) {
      if (s.stage_to_worker[st] != w) continue;
      if (complete_sent[st] < 0) return kUnknown;
      t = std::max(t, complete_sent[st] + (q == d - 1 ? 0.0 : (d - 1) * hop[st]));
    }
    return t;
  };
  double now = 0.0, end = 0.0;

  // Replica q's stage `st` sum has left replica q at `t`.
  auto sum_sent = [&](int q, int st, double t) {
    if (q + 1 < d) {
      sum_arrival[static_cast<size_t>(q + 1) * n_stages + st] = t + hop[st];
    } else {  // the complete sum, to the d - 1 other replicas one after another
      complete_arrival = std::max(complete_arrival, t + (d - 1) * hop[st]);
      complete_sent[st] = t;
    }
  };

  // Time at which `a` may start on worker w of replica q, kUnknown while a producer has not run.
  auto start_time = [&](const Action& a, int q, int w) -> double {
    const int st = a.stage, i = a.microbatch;
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
        if (st > 0) need(f_end[key(q, st - 1, i)], st - 1);
        break;
      case ActionKind::kB:
      case ActionKind::kBW:
        need(f_end[key(q, st, i)], st);
        if (st + 1 < n_stages) need(bwd_end[key(q, st + 1, i)], st + 1);
        break;
      case ActionKind::kW:
        need(bwd_end[key(q, st, i)], st);
        break;
      case ActionKind::kSendAct:
        need(f_end[key(q, st, i)], st);
        break;
      case ActionKind::kSendGrad:
        need(bwd_end[key(q, st, i)], st);
        break;
      case ActionKind::kRecvAct:
        t = act_arrival[key(q, st, i)];
        break;
      case ActionKind::kRecvGrad:
        t = grad_arrival[key(q, st, i)];
        break;
      case ActionKind::kOffload:
      case ActionKind::kReload:
      case ActionKind::kRelease:
        break;
    }
    return t;
  };
  auto is_due = [&now](double t) { return t >= 0 && t <= now + 1e-12 * std::max(1.0, now); };

  while (true) {
    // Start what can start now; instant actions (transfers, copies) complete at once and may
    // unblock a worker visited before, so sweep until nothing moves.
    bool all_done = true, moved = true;
    while (moved) {
      moved = false;
      all_done = true;
      for (int v = 0; v < n; ++v) {
        const int q = v / p, w = v % p;
        const std::vector<Action>& list = s.worker_actions[w];
        ready_at[v] = kUnknown;
        if (running[v]) {
          all_done = false;
          continue;
        }
        if (awaiting_sum[v] >= 0) {
          const int st = awaiting_sum[v];
          const double t = sum_arrival[static_cast<size_t>(q) * n_stages + st];
          if (!is_due(t)) {
            ready_at[v] = t;
            all_done = false;
            continue;
          }
          awaiting_sum[v] = -1;
          moved = true;
          if (sum_cpu(st) > 0) {
            queued_sum[v] = st;
          } else {
            sum_sent(q, st, now);
          }
        }
        if (queued_sum[v] >= 0) {  // the stage's sum work, before anything else
          running[v] = true;
          running_work[v] = queued_sum[v];
          remaining[v] = sum_cpu(queued_sum[v]);
          queued_sum[v] = kNoWork;
          moved = true;
          all_done = false;
          continue;
        }
        while (!running[v] && next[v] < list.size()) {
          const Action& a = list[next[v]];
          const double t = start_time(a, q, w);
          if (!is_due(t)) {
            ready_at[v] = t;
            break;
          }
          moved = true;
          if (IsCompute(a.kind)) {
            running[v] = true;
            remaining[v] = ComputeCost(costs.stages[a.stage], a.kind);
            break;
          }
          std::vector<double>* arrivals = nullptr;
          size_t slot = 0;
          if (a.kind == ActionKind::kSendAct && a.stage + 1 < n_stages) {
            arrivals = &act_arrival;
            slot = key(q, a.stage + 1, a.microbatch);
          } else if (a.kind == ActionKind::kSendGrad && a.stage > 0) {
            arrivals = &grad_arrival;
            slot = key(q, a.stage - 1, a.microbatch);
          }
          if (arrivals != nullptr) {
            const int host = sharing.host_of_worker[v];
            if (cpu_work.message_cpu_s > 0 && host >= 0) {
              messages.push_back({host, cpu_work.message_cpu_s, arrivals, slot, now + costs.comm});
            } else {
              (*arrivals)[slot] = now + costs.comm;
            }
          }
          ++next[v];
        }
        if (!running[v] && next[v] == list.size() && !optimizer_done[v]) {
          const double t = optimizer_ready(q, w);
          if (is_due(t)) {
            running[v] = true;
            running_work[v] = kOptimizer;
            remaining[v] = optimizer_cpu[w];
            optimizer_done[v] = true;
            moved = true;
          } else {
            ready_at[v] = t;
            all_done = false;
          }
        }
        all_done &= !running[v] && next[v] == list.size() && optimizer_done[v];
      }
    }
    if (all_done && messages.empty()) break;
    // Speeds: fair sharing of each host's cores among its running compute threads and the
    // messages' work.
    std::vector<double> demand(sharing.host_cores.size(), 0.0);
    for (int v = 0; v < n; ++v) {
      if (running[v] && sharing.host_of_worker[v] >= 0) {
        demand[sharing.host_of_worker[v]] += sharing.threads_of_worker[v];
      }
    }
    for (const MessageWork& msg : messages) demand[msg.host] += 1;
    auto host_speed = [&](int h) {
      return h < 0 ? 1.0 : std::min(1.0, sharing.host_cores[h] / demand[h]);
    };
    auto speed = [&](int v) { return host_speed(sharing.host_of_worker[v]); };
    double step = kInf;
    for (int v = 0; v < n; ++v) {
      if (running[v]) step = std::min(step, remaining[v] / speed(v));
      if (!running[v] && ready_at[v] > now) step = std::min(step, ready_at[v] - now);
    }
    for (const MessageWork& msg : messages) {
      step = std::min(step, msg.remaining / host_speed(msg.host));
    }
    if (step == kInf) {
      return absl::FailedPreconditionError(
          absl::StrCat("SimulateSharedCores: the schedule deadlocks at t = ", now));
    }
    // Finish the computes and messages' work that end at now + step (within rounding).
    const double after = now + step;
    for (size_t i = 0; i < messages.size();) {
      MessageWork& msg = messages[i];
      msg.remaining -= step * host_speed(msg.host);
      if (msg.remaining > 1e-12 * std::max(1.0, after)) {
        ++i;
        continue;
      }
      (*msg.arrivals)[msg.slot] = std::max(msg.earliest, after);
      msg = messages.back();
      messages.pop_back();
    }
    for (int v = 0; v < n; ++v) {
      if (!running[v]) continue;
      remaining[v] -= step * speed(v);
      if (remaining[v] > 1e-12 * std::max(1.0, after)) continue;
      const int q = v / p;
      running[v] = false;
      end = after;
      if (running_work[v] != kNoWork) {  // the step's CPU work (cpu_work)
        if (running_work[v] >= 0) sum_sent(q, running_work[v], after);
        running_work[v] = kNoWork;
        continue;
      }
      const Action& a = s.worker_actions[v % p][next[v]];
      const size_t k = key(q, a.stage, a.microbatch);
      if (IsForward(a.kind)) f_end[k] = after;
      if (a.kind == ActionKind::kB || a.kind == ActionKind::kBW) bwd_end[k] = after;
      if (d > 1 && IsWeightGradient(a.kind) && reduce_after[a.stage] == next[v]) {
        // The stage's gradient sum (file comment): replica 0 sends at once, the others wait.
        if (q > 0) {
          awaiting_sum[v] = a.stage;
        } else if (sum_cpu(a.stage) > 0) {
          queued_sum[v] = a.stage;
        } else {
          sum_sent(0, a.stage, after);
        }
      }
      ++next[v];
    }
    now = after;
  }
  return std::max(end, d > 1 ? complete_arrival : 0.0);
}

}  // namespace pipetrain::schedule
