#include "coordinator/schedule/engine.h"

#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"

namespace pipetrain::schedule {
namespace {

constexpr double kNotDone = -1.0;

// Per-(stage, microbatch) completion times. The hot pair (16 bytes) is all a compute-only
// schedule touches, so p=64, m=1024 fits in L2; transfer and offload times live apart and are
// allocated only when the schedule has such actions.
struct Hot {
  double f_end = kNotDone, bwd_end = kNotDone;
};
struct Cold {
  double act_arrival = kNotDone, grad_arrival = kNotDone, recv_act = kNotDone, recv_grad = kNotDone,
         offload_end = kNotDone, reload_end = kNotDone;
};

bool HasOffload(const Schedule& schedule) {
  for (const auto& list : schedule.worker_actions) {
    for (const Action& a : list) {
      if (IsOffload(a.kind)) return true;
    }
  }
  return false;
}

class Engine {
 public:
  Engine(const Schedule& s, const CostModel& c, bool record)
      : record_(record),
        sched_(s),
        costs_(c),
        p_(s.num_workers),
        n_stages_(s.num_stages),
        m_(s.num_microbatches),
        explicit_(HasTransfers(s)),
        has_offload_(HasOffload(s)),
        hot_(static_cast<size_t>(s.num_stages) * s.num_microbatches),
        cold_(explicit_ || has_offload_ ? hot_.size() : 0) {}

  EngineRun Run() {
    EngineRun run;
    run.start.resize(p_);
    run.end.resize(p_);
    run.memory_events.resize(p_);
    for (int w = 0; w < p_ && record_; ++w) {
      run.start[w].assign(sched_.worker_actions[w].size(), kNotDone);
      run.end[w].assign(sched_.worker_actions[w].size(), kNotDone);
      run.memory_events[w].reserve(sched_.worker_actions[w].size());
    }
    std::vector<int> pos(p_, 0);
    std::vector<double> free_at(p_, 0.0), copy_free(p_, 0.0);
    std::vector<char> queued(p_, 1);
    std::deque<int> queue;
    for (int w = 0; w < p_; ++w) queue.push_back(w);
    auto wake = [&](int stage) {
      if (stage < 0 || stage >= n_stages_) return;
      const int u = sched_.stage_to_worker[stage];
      if (!queued[u]) {
        queued[u] = 1;
        queue.push_back(u);
      }
    };
    std::vector<MemoryEvent> scratch;  // memory events are dropped when not recording
    while (!queue.empty()) {
      const int w = queue.front();
      queue.pop_front();
      queued[w] = 0;
      const auto& list = sched_.worker_actions[w];
      while (pos[w] < static_cast<int>(list.size())) {
        const Action& a = list[pos[w]];
        double ready = 0.0;
        if (!Ready(a, w, &ready)) break;
        const size_t key = Key(a.stage, a.microbatch);
        const StageCost& sc = costs_.stages[a.stage];
        double start = std::max(free_at[w], ready), end = start;
        if (!record_) scratch.clear();
        auto& mem = record_ ? run.memory_events[w] : scratch;
        switch (a.kind) {
          case ActionKind::kF:
            end = start + sc.f;
            hot_[key].f_end = end;
            mem.push_back({start, sc.activation});
            break;
          case ActionKind::kB:
            end = start + sc.b;
            hot_[key].bwd_end = end;
            if (sc.freed_by_b != 0) mem.push_back({end, -sc.freed_by_b});
            break;
          case ActionKind::kBW:
            end = start + sc.FusedBackward();
            hot_[key].bwd_end = end;
            mem.push_back({end, -sc.activation});
            break;
          case ActionKind::kW:
            end = start + sc.w;
            mem.push_back({end, -(sc.activation - sc.freed_by_b)});
            break;
          case ActionKind::kSendAct:
            if (a.stage + 1 < n_stages_) cold_[key + 1].act_arrival = end + costs_.comm;
            break;
          case ActionKind::kSendGrad:
            if (a.stage > 0) cold_[key - 1].grad_arrival = end + costs_.comm;
            break;
          case ActionKind::kRecvAct:
            start = free_at[w];
            end = std::max(start, ready);
            cold_[key].recv_act = end;
            break;
          case ActionKind::kRecvGrad:
            start = free_at[w];
            end = std::max(start, ready);
            cold_[key].recv_grad = end;
            break;
          case ActionKind::kOffload:
            start = std::max(start, copy_free[w]);
            end = start + costs_.offload;
            copy_free[w] = end;
            cold_[key].offload_end = end;
            mem.push_back({end, -sc.activation});
            break;
          case ActionKind::kReload:
            start = std::max(start, copy_free[w]);
            end = start + costs_.reload;
            copy_free[w] = end;
            cold_[key].reload_end = end;
            mem.push_back({start, sc.activation});
            break;
        }
        if (record_) {
          run.start[w][pos[w]] = start;
          run.end[w][pos[w]] = end;
        }
        // Offload copies run beside compute; everything else holds the worker until `end`.
        if (!IsOffload(a.kind)) free_at[w] = end;
        ++pos[w];
        wake(a.stage - 1);
        wake(a.stage + 1);
      }
    }
    run.blocked_at.assign(p_, -1);
    run.blocked_reason.assign(p_, "");
    for (int w = 0; w < p_; ++w) {
      if (pos[w] < static_cast<int>(sched_.worker_actions[w].size())) {
        run.deadlocked = true;
        run.blocked_at[w] = pos[w];
        run.blocked_reason[w] = WaitReason(sched_.worker_actions[w][pos[w]], w);
      }
    }
    return run;
  }

 private:
  // Microbatch-major: an action and its neighbour-stage input share a cache line or the next.
  size_t Key(int stage, int mb) const { return static_cast<size_t>(mb) * n_stages_ + stage; }
  bool Cross(int stage_a, int stage_b) const {
    return sched_.stage_to_worker[stage_a] != sched_.stage_to_worker[stage_b];
  }

  // Sets *ready to the time the action's inputs are available; false if they never were yet.
  bool Ready(const Action& a, int w, double* ready) const {
    (void)w;
    const size_t key = Key(a.stage, a.microbatch);
    auto need = [&](double t, double extra) {
      if (t < 0) return false;
      *ready = std::max(*ready, t + extra);
      return true;
    };
    *ready = 0.0;
    switch (a.kind) {
      case ActionKind::kF: {
        if (a.stage == 0) return true;
        const bool cross = Cross(a.stage - 1, a.stage);
        if (cross && explicit_) return need(cold_[key].recv_act, 0);
        return need(hot_[key - 1].f_end, cross ? costs_.comm : 0);
      }
      case ActionKind::kB:
      case ActionKind::kBW: {
        if (!need(hot_[key].f_end, 0)) return false;
        if (has_offload_ && cold_[key].offload_end >= 0 && !need(cold_[key].reload_end, 0)) {
          return false;
        }
        if (a.stage == n_stages_ - 1) return true;
        const bool cross = Cross(a.stage + 1, a.stage);
        if (cross && explicit_) return need(cold_[key].recv_grad, 0);
        return need(hot_[key + 1].bwd_end, cross ? costs_.comm : 0);
      }
      case ActionKind::kW:
        return need(hot_[key].bwd_end, 0);
      case ActionKind::kSendAct:
      case ActionKind::kOffload:
        return need(hot_[key].f_end, 0);
      case ActionKind::kSendGrad:
        return need(hot_[key].bwd_end, 0);
      case ActionKind::kRecvAct:
        return need(cold_[key].act_arrival, 0);
      case ActionKind::kRecvGrad:
        return need(cold_[key].grad_arrival, 0);
      case ActionKind::kReload:
        return need(cold_[key].offload_end, 0);
    }
    return false;
  }

  std::string Producer(absl::string_view what, int stage, int mb) const {
    return absl::StrCat(what, " ", stage, "/", mb, " (stage ", stage, ", microbatch ", mb,
                        ", on worker ", sched_.stage_to_worker[stage], ")");
  }

  std::string WaitReason(const Action& a, int w) const {
    (void)w;
    const size_t key = Key(a.stage, a.microbatch);
    const int s = a.stage, i = a.microbatch;
    auto done = [](double t) { return t >= 0; };
    switch (a.kind) {
      case ActionKind::kF:
        if (Cross(s - 1, s) && explicit_) return "waiting for RECV_F " + ToString(a);
        return "waiting for F of " + Producer("stage/microbatch", s - 1, i);
      case ActionKind::kB:
      case ActionKind::kBW:
        if (!done(hot_[key].f_end)) return "waiting for its own forward F of this stage";
        if (has_offload_ && done(cold_[key].offload_end) && !done(cold_[key].reload_end)) {
          return "waiting for RELOAD of its offloaded activations";
        }
        if (Cross(s + 1, s) && explicit_) return "waiting for RECV_B of this stage";
        return "waiting for backward of " + Producer("stage/microbatch", s + 1, i);
      case ActionKind::kW:
        return "waiting for B of this stage and microbatch";
      case ActionKind::kSendAct:
      case ActionKind::kOffload:
        return "waiting for F of this stage and microbatch";
      case ActionKind::kSendGrad:
        return "waiting for the backward of this stage and microbatch";
      case ActionKind::kRecvAct:
        return "waiting for SEND_F from " + Producer("stage/microbatch", s - 1, i);
      case ActionKind::kRecvGrad:
        return "waiting for SEND_B from " + Producer("stage/microbatch", s + 1, i);
      case ActionKind::kReload:
        return "waiting for OFFLOAD of this stage and microbatch";
    }
    return "waiting";
  }

  const bool record_;
  const Schedule& sched_;
  const CostModel& costs_;
  const int p_, n_stages_, m_;
  const bool explicit_;
  const bool has_offload_;
  std::vector<Hot> hot_;
  std::vector<Cold> cold_;
};

}  // namespace

bool HasTransfers(const Schedule& schedule) {
  for (const auto& list : schedule.worker_actions) {
    for (const Action& a : list) {
      if (IsTransfer(a.kind)) return true;
    }
  }
  return false;
}

absl::Status CheckEngineInput(const Schedule& s, const CostModel& costs) {
  if (s.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 1 (got ", s.num_workers, ")"));
  }
  if (s.num_stages < 1 || s.num_microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_stages and num_microbatches must be >= 1 (got ", s.num_stages, " and ",
                     s.num_microbatches, ")"));
  }
  if (static_cast<int>(s.stage_to_worker.size()) != s.num_stages) {
    return absl::InvalidArgumentError(absl::StrCat("placement has ", s.stage_to_worker.size(),
                                                   " entries but num_stages is ", s.num_stages));
  }
  for (int st = 0; st < s.num_stages; ++st) {
    if (s.stage_to_worker[st] < 0 || s.stage_to_worker[st] >= s.num_workers) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", st, " placed on worker ",
                                                     s.stage_to_worker[st], ", allowed 0..",
                                                     s.num_workers - 1));
    }
  }
  if (static_cast<int>(s.worker_actions.size()) != s.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule has ", s.worker_actions.size(), " action lists for ", s.num_workers, " workers"));
  }
  if (static_cast<int>(costs.stages.size()) != s.num_stages) {
    return absl::InvalidArgumentError(absl::StrCat("cost model has ", costs.stages.size(),
                                                   " stages, schedule has ", s.num_stages));
  }
  for (int w = 0; w < s.num_workers; ++w) {
    for (const Action& a : s.worker_actions[w]) {
      if (a.stage < 0 || a.stage >= s.num_stages || a.microbatch < 0 ||
          a.microbatch >= s.num_microbatches) {
        return absl::InvalidArgumentError(
            absl::StrCat("action ", ToString(a), " on worker ", w, " is out of range (stages 0..",
                         s.num_stages - 1, ", microbatches 0..", s.num_microbatches - 1, ")"));
      }
    }
  }
  return absl::OkStatus();
}

EngineRun RunEngine(const Schedule& schedule, const CostModel& costs, bool record) {
  return Engine(schedule, costs, record).Run();
}

}  // namespace pipetrain::schedule
