#include "schedule/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "schedule/engine_waiters.h"

namespace pipetrain::schedule {
namespace {

using engine_internal::Bit;
using engine_internal::kTransferBits;
using engine_internal::kOffloadBits;
using engine_internal::kRunnable;
using engine_internal::kFEnd;
using engine_internal::kBwdEnd;
using engine_internal::kActArrival;
using engine_internal::kGradArrival;
using engine_internal::kRecvActDone;
using engine_internal::kRecvGradDone;
using engine_internal::kOffloadEnd;
using engine_internal::kReloadEnd;
using engine_internal::WaitId;
using engine_internal::Waiters;

constexpr double kNotDone = -1.0;

// Per-(stage, microbatch) completion times. The hot pair (16 bytes) is all a compute-only
// schedule touches; transfer and offload times live apart and are allocated only when the
// schedule has such actions.
struct Hot {
  double f_end = kNotDone, bwd_end = kNotDone;
};
struct Cold {
  double act_arrival = kNotDone, grad_arrival = kNotDone, recv_act = kNotDone, recv_grad = kNotDone,
         offload_end = kNotDone, reload_end = kNotDone;
  bool explicit_release = false;  // a RELEASE frees this stash's device copy, not a compute end
  double copy_units = 0.0;        // device copy an OFFLOAD holds until its RELEASE
};

// One worker's progress (and, for Simulate, its running totals), kept across visits.
struct WorkerRun {
  int pos = 0;        // next list index
  size_t offset = 0;  // its first entry in the timeline
  double free = 0.0;
  double d2h_free = 0.0, h2d_free = 0.0;  // copy engines (one shared when not duplex)
  // Offloaded stashes whose device copy is not released yet: (copy end, units).
  std::vector<std::pair<double, double>> pending;
  std::vector<MemoryEvent> events;  // every memory event, kept for schedules with offload
  double busy = 0.0, first = std::numeric_limits<double>::infinity(), last = 0.0;
  double held = 0.0, peak = 0.0;
  double prev_time = -std::numeric_limits<double>::infinity(), prev_delta = 0.0;
  bool sorted = true;
};

class Engine {
 public:
  Engine(const Schedule& s, const CostModel& c, const ActionScan& scan)
      : sched_(s),
        costs_(c),
        p_(s.num_workers),
        n_stages_(s.num_stages),
        explicit_(scan.HasTransfers()),
        has_offload_(scan.HasOffload()),
        misplaced_(scan.misplaced),
        hot_(static_cast<size_t>(s.num_stages) * s.num_microbatches),
        cold_(explicit_ || has_offload_ ? hot_.size() : 0) {
    if (!has_offload_) return;
    for (const auto& list : s.worker_actions) {
      for (const Action& a : list) {
        if (a.kind == ActionKind::kRelease && a.stage >= 0 && a.stage < n_stages_ &&
            a.microbatch >= 0 && a.microbatch < s.num_microbatches) {
          cold_[Key(a.stage, a.microbatch)].explicit_release = true;
        }
      }
    }
  }

  // kRecord: Simulate's run (times, busy/span, memory curve into *result); else the dry run.
  template <bool kRecord>
  EngineRun Run(SimResult* result) {
    std::vector<WorkerRun> ws(p_);
    TimedAction* timeline = nullptr;
    if constexpr (kRecord) {
      timeline = result->timeline.data();
      result->memory_curve.assign(p_, {});
      size_t at = 0;
      for (int w = 0; w < p_; ++w) {
        ws[w].offset = at;
        const size_t n = sched_.worker_actions[w].size();
        at += n;
        result->memory_curve[w].reserve(n + 1);
        result->memory_curve[w].push_back({0.0, 0.0});
      }
    }
    Waiters waiters(p_, misplaced_);
    const int* place = sched_.stage_to_worker.data();
    const StageCost* stage_costs = costs_.stages.data();
    const double comm = costs_.comm;
    Hot* hot = hot_.data();
    Cold* cold = cold_.data();
    int w = 0;
    while (waiters.Pop(&w)) {
      const Action* actions = sched_.worker_actions[w].data();
      const int n = static_cast<int>(sched_.worker_actions[w].size());
      WorkerRun& me = ws[w];
      TimedAction* out = kRecord ? timeline + me.offset : nullptr;
      std::vector<MemoryPoint>* curve = kRecord ? &result->memory_curve[w] : nullptr;
      int k = me.pos;
      double free = me.free;
      uint64_t missing = kRunnable;
      // Memory step function, in list order; at equal times frees must come first, so an
      // event that sorts before its predecessor marks the worker for a rebuild at the end.
      auto event = [&](double time, double delta) {
        if (time < me.prev_time || (time == me.prev_time && delta < me.prev_delta)) {
          me.sorted = false;
        }
        me.prev_time = time;
        me.prev_delta = delta;
        if (has_offload_) me.events.push_back({time, delta});
        me.held += delta;
        if (std::abs(me.held) < 1e-12) me.held = 0.0;
        me.peak = std::max(me.peak, me.held);
        if (curve->back().time == time) {
          curve->back().units = me.held;
        } else {
          curve->push_back({time, me.held});
        }
      };
      for (; k < n; ++k) {
        const Action a = actions[k];
        const size_t key = Key(a.stage, a.microbatch);
        const StageCost& sc = stage_costs[a.stage];
        // Inputs: ready = max(0, input + transfer time); a missing input blocks the worker.
        double ready = 0.0;
        auto need = [&](double t, double extra, uint64_t id) {
          if (t < 0) {
            missing = id;
            return false;
          }
          ready = std::max(ready, t + extra);
          return true;
        };
        double start = 0.0, end = 0.0;
        switch (a.kind) {
          case ActionKind::kF:
          case ActionKind::kOverlapF: {  // one stream: the pair's F, then its backward
            if (a.stage > 0) {
              const bool cross = place[a.stage - 1] != place[a.stage];
              if (cross && explicit_) {
                if (!need(cold[key].recv_act, 0, WaitId(key, kRecvActDone))) break;
              } else if (!need(hot[key - 1].f_end, cross ? comm : 0, WaitId(key - 1, kFEnd))) {
                break;
              }
            }
            start = std::max(free, ready);
            end = start + sc.f;
            hot[key].f_end = end;
            // Its cross-worker consumer is F(s+1,i); with misplaced actions, anyone (broadcast).
            waiters.Signal(a.stage + 1 < n_stages_ ? place[a.stage + 1] : w, WaitId(key, kFEnd));
            if constexpr (kRecord) event(start, sc.activation);
            break;
          }
          case ActionKind::kB:
          case ActionKind::kBW: {
            if (!need(hot[key].f_end, 0, WaitId(key, kFEnd))) break;
            if (has_offload_ && cold[key].offload_end >= 0 &&
                !need(cold[key].reload_end, 0, WaitId(key, kReloadEnd))) {
              break;
            }
            if (a.stage != n_stages_ - 1) {
              const bool cross = place[a.stage + 1] != place[a.stage];
              if (cross && explicit_) {
                if (!need(cold[key].recv_grad, 0, WaitId(key, kRecvGradDone))) break;
              } else if (!need(hot[key + 1].bwd_end, cross ? comm : 0, WaitId(key + 1, kBwdEnd))) {
                break;
              }
            }
            start = std::max(free, ready);
            const bool fused = a.kind == ActionKind::kBW;
            end = start + (fused ? sc.FusedBackward() : sc.b);
            hot[key].bwd_end = end;
            waiters.Signal(a.stage > 0 ? place[a.stage - 1] : w, WaitId(key, kBwdEnd));
            if constexpr (kRecord) {
              if (fused) {
                event(end, -sc.activation);
              } else if (sc.freed_by_b != 0) {
                event(end, -sc.freed_by_b);
              }
            }
            break;
          }
          case ActionKind::kW:
            if (!need(hot[key].bwd_end, 0, WaitId(key, kBwdEnd))) break;
            start = std::max(free, ready);
            end = start + sc.w;
            if constexpr (kRecord) event(end, -(sc.activation - sc.freed_by_b));
            break;
          case ActionKind::kSendAct:
            if (!need(hot[key].f_end, 0, WaitId(key, kFEnd))) break;
            start = end = std::max(free, ready);
            if (a.stage + 1 < n_stages_) {
              cold[key + 1].act_arrival = end + comm;
              waiters.Signal(place[a.stage + 1], WaitId(key + 1, kActArrival));
            }
            break;
          case ActionKind::kSendGrad:
            if (!need(hot[key].bwd_end, 0, WaitId(key, kBwdEnd))) break;
            start = end = std::max(free, ready);
            if (a.stage > 0) {
              cold[key - 1].grad_arrival = end + comm;
              waiters.Signal(place[a.stage - 1], WaitId(key - 1, kGradArrival));
            }
            break;
          case ActionKind::kRecvAct:
            if (!need(cold[key].act_arrival, 0, WaitId(key, kActArrival))) break;
            start = free;
            end = std::max(start, ready);
            cold[key].recv_act = end;
            waiters.Signal(w, WaitId(key, kRecvActDone));  // (same worker unless misplaced)
            break;
          case ActionKind::kRecvGrad:
            if (!need(cold[key].grad_arrival, 0, WaitId(key, kGradArrival))) break;
            start = free;
            end = std::max(start, ready);
            cold[key].recv_grad = end;
            waiters.Signal(w, WaitId(key, kRecvGradDone));
            break;
          case ActionKind::kOffload: {
            if (!need(hot[key].f_end, 0, WaitId(key, kFEnd))) break;
            double& engine = me.d2h_free;
            start = std::max(std::max(free, ready), engine);
            end = start + costs_.OffloadTime(a.stage);
            engine = end;
            cold[key].offload_end = end;
            waiters.Signal(w, WaitId(key, kOffloadEnd));
            if (cold[key].explicit_release) {
              cold[key].copy_units = sc.activation;
            } else {
              me.pending.push_back({end, sc.activation});
            }
            break;
          }
          case ActionKind::kRelease: {
            // The worker waits for the copy, then the device copy is freed.
            if (!need(cold[key].offload_end, 0, WaitId(key, kOffloadEnd))) break;
            start = free;
            end = std::max(free, ready);
            if constexpr (kRecord) {
              if (cold[key].copy_units != 0) event(end, -cold[key].copy_units);
            }
            cold[key].copy_units = 0.0;
            break;
          }
          case ActionKind::kReload: {
            if (!need(cold[key].offload_end, 0, WaitId(key, kOffloadEnd))) break;
            double& engine = costs_.duplex ? me.h2d_free : me.d2h_free;
            const double issue = free;
            start = std::max(std::max(issue, ready), engine);
            end = start + costs_.ReloadTime(a.stage);
            engine = end;
            cold[key].reload_end = end;
            waiters.Signal(w, WaitId(key, kReloadEnd));
            if constexpr (kRecord) event(issue, sc.activation);
            break;
          }
        }
        if (missing != kRunnable) break;
        if constexpr (kRecord) {
          out[k].start = start;
          out[k].end = end;
          if (IsCompute(a.kind)) {
            me.busy += end - start;
            me.first = std::min(me.first, start);
            me.last = std::max(me.last, end);
          }
        }
        // A compute end waits for every offload copy issued before it, then releases the device
        // copies; the worker stalls until then if a copy is late.
        double free_at = end;
        if (!me.pending.empty() && IsCompute(a.kind)) {
          for (const auto& [copy_end, units] : me.pending) free_at = std::max(free_at, copy_end);
          if constexpr (kRecord) {
            for (const auto& [copy_end, units] : me.pending) event(free_at, -units);
          }
          me.pending.clear();
        }
        // Offload copies run beside compute; everything else holds the worker until `end`.
        if (a.kind != ActionKind::kOffload && a.kind != ActionKind::kReload) free = free_at;
      }
      me.pos = k;
      me.free = free;
      if (k == n) {
        if constexpr (kRecord) {
          for (const auto& [copy_end, units] : me.pending) event(copy_end, -units);
        }
        me.pending.clear();
        waiters.Finish(w);
      } else {
        waiters.Block(w, missing);
      }
    }
    EngineRun run;
    run.blocked_at.assign(p_, -1);
    run.blocked_reason.assign(p_, "");
    for (int u = 0; u < p_; ++u) {
      if (ws[u].pos < static_cast<int>(sched_.worker_actions[u].size())) {
        run.deadlocked = true;
        run.blocked_at[u] = ws[u].pos;
        run.blocked_reason[u] = WaitReason(sched_.worker_actions[u][ws[u].pos]);
      }
    }
    if constexpr (kRecord) {
      if (!run.deadlocked) Finish(ws, result, &run);
    }
    return run;
  }

 private:
  // Per-worker totals into the result; rebuilds the memory curve of any worker whose events
  // were not in time order (offload copies, zero-length actions).
  void Finish(const std::vector<WorkerRun>& ws, SimResult* r, EngineRun* run) const {
    r->busy.assign(p_, 0.0);
    r->span.assign(p_, 0.0);
    r->peak_memory.assign(p_, 0.0);
    run->first_start = std::numeric_limits<double>::infinity();
    run->last_end = 0.0;
    std::vector<MemoryEvent> ev;
    for (int w = 0; w < p_; ++w) {
      const WorkerRun& me = ws[w];
      r->busy[w] = me.busy;
      if (me.last >= me.first) {
        r->span[w] = me.last - me.first;
        run->first_start = std::min(run->first_start, me.first);
        run->last_end = std::max(run->last_end, me.last);
      }
      r->peak_memory[w] = me.peak;
      if (me.sorted) continue;
      const size_t n = sched_.worker_actions[w].size();
      ev.clear();
      if (has_offload_) {
        ev = me.events;  // offload releases depend on context, so they were recorded
      } else {
        for (size_t k = 0; k < n; ++k) {
          const TimedAction& t = r->timeline[me.offset + k];
          AppendMemoryEvents(t, costs_.stages[t.action.stage], &ev);
        }
      }
      auto before = [](const MemoryEvent& a, const MemoryEvent& b) {
        return a.time < b.time || (a.time == b.time && a.delta < b.delta);
      };
      std::stable_sort(ev.begin(), ev.end(), before);
      double held = 0.0, peak = 0.0;
      auto& curve = r->memory_curve[w];
      curve.clear();
      curve.push_back({0.0, 0.0});
      for (const MemoryEvent& e : ev) {
        held += e.delta;
        if (std::abs(held) < 1e-12) held = 0.0;
        peak = std::max(peak, held);
        if (curve.back().time == e.time) {
          curve.back().units = held;
        } else {
          curve.push_back({e.time, held});
        }
      }
      r->peak_memory[w] = peak;
    }
  }

  // Microbatch-major: an action and its neighbour-stage input share a cache line or the next.
  size_t Key(int stage, int mb) const { return static_cast<size_t>(mb) * n_stages_ + stage; }
  bool Cross(int stage_a, int stage_b) const {
    return sched_.stage_to_worker[stage_a] != sched_.stage_to_worker[stage_b];
  }

  std::string Producer(absl::string_view what, int stage, int mb) const {
    if (stage < 0 || stage >= n_stages_) {
      return absl::StrCat(what, " ", stage, "/", mb, " (stage ", stage, " does not exist)");
    }
    return absl::StrCat(what, " ", stage, "/", mb, " (stage ", stage, ", microbatch ", mb,
                        ", on worker ", sched_.stage_to_worker[stage], ")");
  }

  // Only on the failure path.
  std::string WaitReason(const Action& a) const {
    const size_t key = Key(a.stage, a.microbatch);
    const int s = a.stage, i = a.microbatch;
    auto done = [](double t) { return t >= 0; };
    switch (a.kind) {
      case ActionKind::kF:
      case ActionKind::kOverlapF:
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
      case ActionKind::kRelease:
        return "waiting for OFFLOAD of this stage and microbatch";
    }
    return "waiting";
  }

  const Schedule& sched_;
  const CostModel& costs_;
  const int p_, n_stages_;
  const bool explicit_;
  const bool has_offload_;
  const bool misplaced_;
  std::vector<Hot> hot_;
  std::vector<Cold> cold_;
};

}  // namespace

bool ActionScan::HasTransfers() const { return (kinds & kTransferBits) != 0; }
bool ActionScan::HasOffload() const { return (kinds & kOffloadBits) != 0; }

ActionScan ScanActions(const Schedule& s) {
  ActionScan scan;
  const unsigned n_stages = static_cast<unsigned>(s.num_stages);
  const unsigned m = static_cast<unsigned>(s.num_microbatches);
  const int* place = s.stage_to_worker.data();
  bool out_of_range = false, misplaced = false;
  for (int w = 0; w < static_cast<int>(s.worker_actions.size()); ++w) {
    const auto& list = s.worker_actions[w];
    scan.total += list.size();
    for (const Action& a : list) {
      scan.kinds |= Bit(a.kind);
      const bool stage_ok = static_cast<unsigned>(a.stage) < n_stages;
      out_of_range |= !stage_ok;
      out_of_range |= static_cast<unsigned>(a.microbatch) >= m;
      misplaced |= stage_ok && place[a.stage] != w;
    }
  }
  scan.in_range = !out_of_range;
  scan.misplaced = misplaced;
  return scan;
}

bool HasTransfers(const Schedule& schedule) {
  for (const auto& list : schedule.worker_actions) {
    uint32_t kinds = 0;
    for (const Action& a : list) kinds |= Bit(a.kind);
    if (kinds & kTransferBits) return true;
  }
  return false;
}

absl::Status CheckEngineInput(const Schedule& s, const CostModel& costs, ActionScan* scan,
                              std::vector<TimedAction>* timeline) {
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
  ActionScan result;
  if (timeline == nullptr) {
    result = ScanActions(s);
  } else {
    // The scan and the timeline's first fill in one pass over the lists.
    size_t total = 0;
    for (const auto& list : s.worker_actions) total += list.size();
    timeline->clear();
    timeline->reserve(total);
    const unsigned n_stages = static_cast<unsigned>(s.num_stages);
    const unsigned m = static_cast<unsigned>(s.num_microbatches);
    const int* place = s.stage_to_worker.data();
    bool out_of_range = false, misplaced = false;
    for (int w = 0; w < s.num_workers; ++w) {
      for (const Action& a : s.worker_actions[w]) {
        result.kinds |= Bit(a.kind);
        const bool stage_ok = static_cast<unsigned>(a.stage) < n_stages;
        out_of_range |= !stage_ok;
        out_of_range |= static_cast<unsigned>(a.microbatch) >= m;
        misplaced |= stage_ok && place[a.stage] != w;
        timeline->push_back({a, w, kNotDone, kNotDone});
      }
    }
    result.in_range = !out_of_range;
    result.misplaced = misplaced;
    result.total = total;
  }
  *scan = result;
  if (result.in_range) return absl::OkStatus();
  for (int w = 0; w < s.num_workers; ++w) {  // failure path: find the first offender
    for (const Action& a : s.worker_actions[w]) {
      if (a.stage < 0 || a.stage >= s.num_stages || a.microbatch < 0 ||
          a.microbatch >= s.num_microbatches) {
        return absl::InvalidArgumentError(
            absl::StrCat("action ", ToString(a), " on worker ", w, " is out of range (stages 0..",
                         s.num_stages - 1, ", microbatches 0..", s.num_microbatches - 1, ")"));
      }
    }
  }
  return absl::InternalError("CheckEngineInput: inconsistent range scan");
}

EngineRun RunEngine(const Schedule& schedule, const CostModel& costs, const ActionScan& scan,
                    SimResult* result) {
  Engine engine(schedule, costs, scan);
  return result != nullptr ? engine.Run<true>(result) : engine.Run<false>(nullptr);
}

void AppendMemoryEvents(const TimedAction& t, const StageCost& sc, std::vector<MemoryEvent>* out) {
  switch (t.action.kind) {
    case ActionKind::kF:
    case ActionKind::kOverlapF:
      out->push_back({t.start, sc.activation});
      break;
    case ActionKind::kB:
      if (sc.freed_by_b != 0) out->push_back({t.end, -sc.freed_by_b});
      break;
    case ActionKind::kBW:
      out->push_back({t.end, -sc.activation});
      break;
    case ActionKind::kW:
      out->push_back({t.end, -(sc.activation - sc.freed_by_b)});
      break;
    default:  // OFFLOAD/RELOAD: their events depend on the worker's other actions (engine.h)
      break;
  }
}

}  // namespace pipetrain::schedule
