#include "coordinator/schedule/v_list_scheduler.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pipetrain::schedule {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-9;
constexpr double kCoolDownDelay = 1e15;

struct Candidate {
  ActionKind kind = ActionKind::kF;
  int stage = 0;
  int mb = 0;
  double duration = 0.0;
  double ready = kInf;        // input arrival; kInf while its producer is not scheduled yet
  double lower_bound = kInf;  // earliest possible arrival when `ready` is unknown
  bool memory_ok = true;
  double key = 0.0;  // priority: smaller first, ties by microbatch then chain
  int chain = 0;
};

bool Before(const Candidate& a, const Candidate& b) {
  if (a.key != b.key) return a.key < b.key;
  if (a.mb != b.mb) return a.mb < b.mb;
  return a.chain < b.chain;
}

class VListScheduler {
 public:
  VListScheduler(int p, int m, const CostModel& costs, const BuildingBlock& block,
                 const VListOptions& options)
      : p_(p), m_(m), s_(2 * p), costs_(costs), block_(block), opt_(options) {}

  absl::StatusOr<VListResult> Run(std::string name) {
    result_.schedule = MakeEmptySchedule(std::move(name), p_, m_, block_.stage_to_worker);
    for (int w = 0; w < p_; ++w) {
      const double a0 = costs_.stages[w].activation, a1 = costs_.stages[s_ - 1 - w].activation;
      if (a0 + a1 > opt_.memory_cap + kEps) {
        return absl::InvalidArgumentError(absl::StrCat("memory_cap ", opt_.memory_cap,
                                                       " is below one microbatch's activation (",
                                                       a0 + a1, " units) on worker ", w));
      }
      result_.schedule.worker_actions[w].reserve(6 * m_);
    }
    next_.assign(3 * s_, 0);
    end_f_.assign(static_cast<size_t>(s_) * m_, 0.0);
    end_b_.assign(static_cast<size_t>(s_) * m_, 0.0);
    workers_.assign(p_, Worker{});
    result_.peak.assign(p_, 0.0);
    if (opt_.strict_order) order_ = RepeatBlock(block_, m_, "");
    for (int w = 0; w < p_; ++w) Wake(w, 0.0);
    long remaining = 6L * p_ * m_;
    while (!events_.empty()) {
      auto [neg_time, w, version] = events_.top();
      events_.pop();
      Worker& worker = workers_[w];
      if (version != worker.version) continue;
      worker.pending = kInf;
      now_ = -neg_time;
      if (Decide(w, now_)) --remaining;
    }
    if (opt_.strict_order) {
      for (int w = 0; w < p_; ++w) {
        if (result_.peak[w] > opt_.memory_cap + kEps) {
          return absl::ResourceExhaustedError(absl::StrCat("repeated block peaks at ",
                                                           result_.peak[w], " units on worker ", w,
                                                           ", above the cap ", opt_.memory_cap));
        }
      }
    }
    if (remaining != 0) {
      return absl::InternalError(absl::StrCat("V list scheduler stalled with ", remaining,
                                              " passes left (cap ", opt_.memory_cap, ")"));
    }
    return std::move(result_);
  }

 private:
  struct Worker {
    double clock = 0.0;     // end of the last pass
    double pending = kInf;  // time of the queued decision, kInf when asleep
    int version = 0;
    double mem = 0.0;
  };
  using Event = std::tuple<double, int, int>;  // (-time, worker, version): min-heap on time

  int& Next(ActionKind kind, int stage) {
    return next_[3 * stage + (kind == ActionKind::kF ? 0 : kind == ActionKind::kB ? 1 : 2)];
  }
  double Comm(int a, int b) const {
    return block_.stage_to_worker[a] == block_.stage_to_worker[b] ? 0.0 : costs_.comm;
  }

  void Wake(int w, double time) {
    Worker& worker = workers_[w];
    worker.pending = time;
    ++worker.version;
    events_.emplace(-time, w, worker.version);
  }
  // An input of worker `w` becomes available at `ready`: make sure it looks again by then.
  void Notify(int w, double ready) {
    Worker& worker = workers_[w];
    // Never in the past: every decision at time t sees all passes started before t.
    const double when = std::max({worker.clock, ready, now_});
    if (when < worker.pending) Wake(w, when);
  }

  double Key(ActionKind kind, int stage, int mb) const {
    if (opt_.priority == VPriority::kBlock) return block_.Nominal(kind, stage, mb);
    if (kind == ActionKind::kB) return 0.0;
    if (kind == ActionKind::kF) return stage >= p_ ? 1.0 : 2.0;
    return 3.0;
  }

  // Adds the F, B or W candidate of `stage`, if that stage has one left.
  void AddCandidates(int w, int stage, double now, std::vector<Candidate>& out) {
    const StageCost& c = costs_.stages[stage];
    const Worker& worker = workers_[w];
    const int a_stage = w, b_stage = s_ - 1 - w;
    // Forward.
    if (int j = Next(ActionKind::kF, stage); j < m_) {
      Candidate x{ActionKind::kF, stage, j, c.f};
      if (stage == 0) {
        x.ready = 0.0;
      } else if (Next(ActionKind::kF, stage - 1) > j) {
        x.ready = end_f_[(stage - 1) * static_cast<size_t>(m_) + j] + Comm(stage - 1, stage);
      } else {
        x.lower_bound = now + costs_.stages[stage - 1].f + Comm(stage - 1, stage);
      }
      const double a0 = costs_.stages[a_stage].activation;
      const double a1 = costs_.stages[b_stage].activation;
      if (stage == a_stage) {
        const double in_first_leg =
            a0 * (Next(ActionKind::kF, a_stage) - Next(ActionKind::kF, b_stage));
        const double releasable = worker.mem - in_first_leg;
        x.memory_ok = worker.mem + a0 <= opt_.memory_cap + kEps &&
                      (worker.mem + a0 + a1 <= opt_.memory_cap + kEps || releasable >= a1 - kEps);
      } else {
        x.memory_ok = worker.mem + a1 <= opt_.memory_cap + kEps;
      }
      x.key = Key(ActionKind::kF, stage, j);
      x.chain = block_.Pass(ActionKind::kF, stage).chain;
      out.push_back(x);
    }
    // Backward (input gradient): needs F of this stage on the last stage, else B of stage+1.
    if (int j = Next(ActionKind::kB, stage); j < m_) {
      Candidate x{ActionKind::kB, stage, j, c.b};
      const bool last = stage == s_ - 1;
      const int producer = last ? stage : stage + 1;
      const bool done =
          last ? Next(ActionKind::kF, stage) > j : Next(ActionKind::kB, stage + 1) > j;
      if (done) {
        x.ready = (last ? end_f_ : end_b_)[producer * static_cast<size_t>(m_) + j] +
                  Comm(producer, stage);
      } else {
        x.lower_bound = now + (last ? costs_.stages[stage].f : costs_.stages[stage + 1].b) +
                        Comm(producer, stage);
      }
      x.key = Key(ActionKind::kB, stage, j);
      x.chain = block_.Pass(ActionKind::kB, stage).chain;
      out.push_back(x);
    }
    // Weight gradient: its B already ran on this worker.
    if (int j = Next(ActionKind::kW, stage); j < Next(ActionKind::kB, stage)) {
      Candidate x{ActionKind::kW, stage, j, c.w};
      x.ready = end_b_[stage * static_cast<size_t>(m_) + j];
      x.key = Key(ActionKind::kW, stage, j);
      // Cool-down: once the worker has no forward left, memory can only fall, so W's wait and
      // fill the gaps between the returning B's (the paper's cool-down reordering).
      if (Next(ActionKind::kF, a_stage) == m_ && Next(ActionKind::kF, b_stage) == m_) {
        x.key += kCoolDownDelay;
      }
      x.chain = block_.Pass(ActionKind::kW, stage).chain;
      out.push_back(x);
    }
  }

  // Worker `w` looks at time `now`; returns true when it started a pass.
  bool Decide(int w, double now) {
    cands_.clear();
    AddCandidates(w, w, now, cands_);
    AddCandidates(w, s_ - 1 - w, now, cands_);
    const Candidate* best_ready = nullptr;  // most urgent ready pass
    const Candidate* urgent = nullptr;      // most urgent pass overall (memory permitting)
    double next_known = kInf;
    if (opt_.strict_order) {
      // Squeeze only: the one allowed pass is the head of the repeated block's order.
      const auto& list = order_.worker_actions[w];
      const size_t pos = result_.schedule.worker_actions[w].size();
      auto head = std::find_if(cands_.begin(), cands_.end(), [&](const Candidate& x) {
        const Action& a = list[pos];
        return x.kind == a.kind && x.stage == a.stage && x.mb == a.microbatch;
      });
      if (head == cands_.end()) {
        cands_.clear();
      } else {
        Candidate keep = *head;
        keep.memory_ok = true;
        cands_.assign(1, keep);
      }
    }
    for (const Candidate& x : cands_) {
      if (!x.memory_ok) continue;
      if (urgent == nullptr || Before(x, *urgent)) urgent = &x;
      if (x.ready <= now + kEps) {
        if (best_ready == nullptr || Before(x, *best_ready)) best_ready = &x;
      } else if (x.ready < next_known) {
        next_known = x.ready;
      }
    }
    const Candidate* pick = best_ready;
    if (opt_.conservative && urgent != nullptr && urgent != best_ready) {
      // Backfill only what ends before the urgent pass can start.
      const double deadline = urgent->ready < kInf ? urgent->ready : urgent->lower_bound;
      pick = nullptr;
      for (const Candidate& x : cands_) {
        if (!x.memory_ok || x.ready > now + kEps || now + x.duration > deadline + kEps) continue;
        if (pick == nullptr || Before(x, *pick)) pick = &x;
      }
      if (pick == nullptr) {
        if (urgent->ready < kInf) {
          next_known = urgent->ready;
        } else if (opt_.priority != VPriority::kBlock) {
          // Type priorities are not dependency-consistent: waiting on an unknown producer
          // could wait on ourselves. Block keys are (producer key < consumer key), so a wait
          // for an unscheduled producer always ends.
          pick = best_ready;
        }
      }
    }
    if (pick == nullptr) {
      if (next_known < kInf) Wake(w, next_known);
      return false;  // otherwise asleep until Notify
    }
    Commit(w, *pick, now);
    return true;
  }

  void Commit(int w, const Candidate& x, double now) {
    Worker& worker = workers_[w];
    const double start = std::max(now, x.ready);
    const double end = start + x.duration;
    const StageCost& c = costs_.stages[x.stage];
    const size_t idx = x.stage * static_cast<size_t>(m_) + x.mb;
    ++Next(x.kind, x.stage);
    if (x.kind == ActionKind::kF) {
      end_f_[idx] = end;
      worker.mem += c.activation;
      result_.peak[w] = std::max(result_.peak[w], worker.mem);
      if (x.stage + 1 < s_)
        Notify(block_.stage_to_worker[x.stage + 1], end + Comm(x.stage, x.stage + 1));
    } else if (x.kind == ActionKind::kB) {
      end_b_[idx] = end;
      worker.mem -= c.freed_by_b;
      if (x.stage > 0)
        Notify(block_.stage_to_worker[x.stage - 1], end + Comm(x.stage, x.stage - 1));
    } else {
      worker.mem -= c.activation - c.freed_by_b;
    }
    worker.clock = end;
    result_.makespan = std::max(result_.makespan, end);
    result_.schedule.worker_actions[w].push_back(Action{x.kind, x.stage, x.mb});
    Wake(w, end);
  }

  const int p_, m_, s_;
  const CostModel& costs_;
  const BuildingBlock& block_;
  const VListOptions opt_;
  std::vector<int> next_;  // per stage: next F, B, W microbatch
  std::vector<double> end_f_, end_b_;
  std::vector<Worker> workers_;
  std::priority_queue<Event> events_;
  std::vector<Candidate> cands_;
  double now_ = 0.0;
  Schedule order_;  // strict_order: the repeated block
  VListResult result_;
};

}  // namespace

absl::StatusOr<VListResult> ListScheduleV(int num_workers, int num_microbatches,
                                          const CostModel& costs, const BuildingBlock& block,
                                          const VListOptions& options, std::string name) {
  if (num_workers < 1 || num_microbatches < 1 ||
      static_cast<int>(costs.stages.size()) != 2 * num_workers ||
      block.NumStages() != 2 * num_workers) {
    return absl::InvalidArgumentError("ListScheduleV: p, m, costs and block do not match");
  }
  VListScheduler scheduler(num_workers, num_microbatches, costs, block, options);
  return scheduler.Run(std::move(name));
}

}  // namespace pipetrain::schedule
