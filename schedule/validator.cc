#include "schedule/validator.h"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/engine.h"
#include "schedule/grid_text.h"
#include "schedule/quick_validate.h"

namespace pipetrain::schedule {
namespace {

struct Pos {
  int worker = -1;
  int index = -1;
  bool Found() const { return index >= 0; }
};

class Validator {
 public:
  explicit Validator(const Schedule& s) : s_(s) {}

  absl::Status Run() {
    if (s_.num_workers < 1)
      return Fail(absl::StrCat("num_workers must be >= 1 (got ", s_.num_workers, ")"));
    if (static_cast<int>(s_.worker_actions.size()) != s_.num_workers) {
      return Fail(absl::StrCat("worker_actions has ", s_.worker_actions.size(),
                               " lists but num_workers is ", s_.num_workers));
    }
    if (s_.num_stages < 1)
      return Fail(absl::StrCat("num_stages must be >= 1 (got ", s_.num_stages, ")"));
    if (s_.num_microbatches < 1) {
      return Fail(absl::StrCat("num_microbatches must be >= 1 (got ", s_.num_microbatches, ")"));
    }
    if (static_cast<int>(s_.stage_to_worker.size()) != s_.num_stages) {
      return Fail(absl::StrCat("placement size mismatch: stage_to_worker has ",
                               s_.stage_to_worker.size(), " entries, num_stages is ",
                               s_.num_stages));
    }
    for (int st = 0; st < s_.num_stages; ++st) {
      const int w = s_.stage_to_worker[st];
      if (w < 0 || w >= s_.num_workers) {
        return Fail(absl::StrCat("placement: stage ", st, " is on worker ", w, ", allowed 0..",
                                 s_.num_workers - 1));
      }
    }
    m_ = s_.num_microbatches;
    const size_t n = static_cast<size_t>(s_.num_stages) * m_;
    n_ = n;
    for (int w = 0; w < s_.num_workers; ++w) {
      const auto& list = s_.worker_actions[w];
      for (int k = 0; k < static_cast<int>(list.size()); ++k) {
        PT_RETURN_IF_ERROR(Record(list[k], w, k));
      }
    }
    PT_RETURN_IF_ERROR(CheckCompute());
    PT_RETURN_IF_ERROR(CheckTransfers());
    PT_RETURN_IF_ERROR(CheckOffload());
    return CheckDeadlock();
  }

 private:
  absl::Status Fail(const std::string& what, std::vector<std::pair<int, int>> marks = {},
                    bool deadlock = false) const {
    std::string msg =
        absl::StrCat("invalid schedule \"", s_.name, "\": ", what, "\n", FormatGrid(s_, marks));
    return deadlock ? absl::FailedPreconditionError(msg) : absl::InvalidArgumentError(msg);
  }
  absl::Status FailAt(const std::string& what, Pos at, Pos other = {}) const {
    std::vector<std::pair<int, int>> marks = {{at.worker, at.index}};
    if (other.Found()) marks.push_back({other.worker, other.index});
    return Fail(absl::StrCat(what, " (worker ", at.worker, ", step ", at.index, ")"), marks);
  }
  size_t Key(int stage, int mb) const { return static_cast<size_t>(stage) * m_ + mb; }
  int WorkerOf(int stage) const { return s_.stage_to_worker[stage]; }
  Pos At(ActionKind kind, int stage, int mb) const {
    const auto& table = pos_[static_cast<int>(kind)];
    if (table.empty()) return Pos{};
    return Pos{WorkerOf(stage), table[Key(stage, mb)]};
  }
  std::string Name(ActionKind kind, int stage, int mb) const {
    return ToString(Action{kind, stage, mb});
  }

  absl::Status Record(const Action& a, int w, int k) {
    const Pos here{w, k};
    // Names are built only on the error paths: this runs once per action.
    if (a.stage < 0 || a.stage >= s_.num_stages) {
      return FailAt(absl::StrCat(ToString(a), ": stage ", a.stage, " out of range, allowed 0..",
                                 s_.num_stages - 1),
                    here);
    }
    if (a.microbatch < 0 || a.microbatch >= m_) {
      return FailAt(absl::StrCat(ToString(a), ": microbatch ", a.microbatch,
                                 " out of range, allowed 0..", m_ - 1),
                    here);
    }
    const int owner = WorkerOf(a.stage);
    if (IsTransfer(a.kind)) {
      const int peer = PeerStage(a);
      if (peer < 0 || peer >= s_.num_stages) {
        return FailAt(absl::StrCat(ToString(a),
                                   ": transfer over a stage edge that does not exist (peer "
                                   "stage ",
                                   peer, ")"),
                      here);
      }
      if (owner != w) {
        return FailAt(absl::StrCat(ToString(a), ": ", IsRecv(a.kind) ? "RECV" : "SEND",
                                   " on the wrong worker: it belongs on worker ", owner,
                                   " (which holds stage ", a.stage, "), found on worker ", w),
                      here);
      }
      if (WorkerOf(peer) == w) {
        return FailAt(absl::StrCat(ToString(a), ": transfer between stages ", a.stage, " and ",
                                   peer, " which are both on worker ", w,
                                   " (same-worker hand-offs need no transfer)"),
                      here);
      }
    } else if (owner != w) {
      return FailAt(absl::StrCat(ToString(a), ": action on the wrong worker: stage ", a.stage,
                                 " is placed on worker ", owner, ", found on worker ", w),
                    here);
    }
    if (a.kind == ActionKind::kOverlapF) {
      const auto& list = s_.worker_actions[w];
      if (k + 1 >= static_cast<int>(list.size()) ||
          (list[k + 1].kind != ActionKind::kB && list[k + 1].kind != ActionKind::kBW)) {
        return FailAt(absl::StrCat("unpaired OVERLAP_F: ", ToString(a),
                                   " must be followed directly by the B or BW it overlaps, found ",
                                   k + 1 < static_cast<int>(list.size())
                                       ? ToString(list[k + 1])
                                       : std::string("the end of the list")),
                      here);
      }
    }
    // Index per kind, allocated on first use: compute-only schedules never pay for the
    // transfer and offload tables. The worker is implied (checked above: the stage's owner).
    // An overlapped F is an F for every rule below.
    auto& table = pos_[static_cast<int>(a.kind == ActionKind::kOverlapF ? ActionKind::kF
                                                                         : a.kind)];
    if (table.empty()) table.assign(n_, -1);
    int32_t& slot_index = table[Key(a.stage, a.microbatch)];
    const Pos slot{owner, slot_index};
    if (slot.Found()) {
      return FailAt(
          absl::StrCat("duplicate ", KindToken(a.kind), ": ", ToString(a), " appears twice"), here,
          slot);
    }
    slot_index = k;
    return absl::OkStatus();
  }

  absl::Status CheckCompute() const {
    for (int st = 0; st < s_.num_stages; ++st) {
      for (int i = 0; i < m_; ++i) {
        const Pos& f = At(ActionKind::kF, st, i);
        const Pos& b = At(ActionKind::kB, st, i);
        const Pos& wg = At(ActionKind::kW, st, i);
        const Pos& bw = At(ActionKind::kBW, st, i);
        if (!f.Found()) {
          return Fail(absl::StrCat("missing F: ", Name(ActionKind::kF, st, i),
                                   " never runs (stage ", st, " is on worker ", WorkerOf(st), ")"));
        }
        if (s_.forward_only) {
          for (ActionKind kind : {ActionKind::kB, ActionKind::kW, ActionKind::kBW}) {
            if (const Pos& at = At(kind, st, i); at.Found()) {
              return FailAt(absl::StrCat("backward in a forward-only schedule: ",
                                         Name(kind, st, i)),
                            at);
            }
          }
          continue;
        }
        if (bw.Found() && (b.Found() || wg.Found())) {
          const Pos& other = b.Found() ? b : wg;
          return FailAt(absl::StrCat("both BW and B/W for stage ", st, " microbatch ", i, ": ",
                                     Name(ActionKind::kBW, st, i), " and ",
                                     Name(b.Found() ? ActionKind::kB : ActionKind::kW, st, i)),
                        bw, other);
        }
        if (!bw.Found() && !b.Found() && !wg.Found()) {
          return Fail(absl::StrCat("missing backward: stage ", st, " microbatch ", i,
                                   " has no BW (", Name(ActionKind::kBW, st, i), ") and no B (",
                                   Name(ActionKind::kB, st, i), ")"),
                      {{f.worker, f.index}});
        }
        if (b.Found() && !wg.Found()) {
          return FailAt(absl::StrCat("B without W: ", Name(ActionKind::kB, st, i),
                                     " has no matching ", Name(ActionKind::kW, st, i)),
                        b);
        }
        if (wg.Found() && !b.Found()) {
          return FailAt(absl::StrCat("W without B: ", Name(ActionKind::kW, st, i),
                                     " has no matching ", Name(ActionKind::kB, st, i)),
                        wg);
        }
        const Pos& bwd = bw.Found() ? bw : b;
        if (bwd.index < f.index) {
          return FailAt(
              absl::StrCat("F after its backward: ", Name(ActionKind::kF, st, i), " comes after ",
                           ToString(s_.worker_actions[bwd.worker][bwd.index])),
              f, bwd);
        }
        if (b.Found() && wg.index < b.index) {
          return FailAt(absl::StrCat("W before B: ", Name(ActionKind::kW, st, i), " comes before ",
                                     Name(ActionKind::kB, st, i)),
                        wg, b);
        }
      }
    }
    return absl::OkStatus();
  }

  Pos Backward(int st, int i) const {
    const Pos& bw = At(ActionKind::kBW, st, i);
    return bw.Found() ? bw : At(ActionKind::kB, st, i);
  }

  // Checks one direction of one cross-worker edge: producer compute -> SEND -> RECV -> consumer.
  absl::Status CheckEdge(ActionKind send_kind, int send_stage, ActionKind recv_kind, int recv_stage,
                         int i, Pos producer, Pos consumer) const {
    const Pos& send = At(send_kind, send_stage, i);
    const Pos& recv = At(recv_kind, recv_stage, i);
    auto send_name = [&] { return Name(send_kind, send_stage, i); };
    auto recv_name = [&] { return Name(recv_kind, recv_stage, i); };
    if (send.Found() && !recv.Found()) {
      return FailAt(absl::StrCat("unmatched SEND: ", send_name(), " has no ", recv_name(),
                                 " on worker ", WorkerOf(recv_stage)),
                    send);
    }
    if (recv.Found() && !send.Found()) {
      return FailAt(absl::StrCat("unmatched RECV: ", recv_name(), " has no ", send_name(),
                                 " on worker ", WorkerOf(send_stage)),
                    recv);
    }
    if (!send.Found()) {
      return Fail(absl::StrCat("missing transfer: the schedule has explicit transfers but no ",
                               send_name(), "/", recv_name(), " pair between workers ",
                               WorkerOf(send_stage), " and ", WorkerOf(recv_stage)),
                  {{consumer.worker, consumer.index}});
    }
    if (send.index < producer.index) {
      return FailAt(absl::StrCat("SEND before its producer: ", send_name(), " comes before ",
                                 ToString(s_.worker_actions[producer.worker][producer.index])),
                    send, producer);
    }
    if (recv.index > consumer.index) {
      return FailAt(absl::StrCat("RECV after its consumer: ", recv_name(), " comes after ",
                                 ToString(s_.worker_actions[consumer.worker][consumer.index])),
                    recv, consumer);
    }
    return absl::OkStatus();
  }

  absl::Status CheckTransfers() const {
    if (!HasTransfers(s_)) return absl::OkStatus();
    for (int st = 0; st + 1 < s_.num_stages; ++st) {
      if (WorkerOf(st) == WorkerOf(st + 1)) continue;
      for (int i = 0; i < m_; ++i) {
        PT_RETURN_IF_ERROR(CheckEdge(ActionKind::kSendAct, st, ActionKind::kRecvAct, st + 1, i,
                                     At(ActionKind::kF, st, i), At(ActionKind::kF, st + 1, i)));
        if (s_.forward_only) {
          for (const auto& [kind, stage] : {std::pair{ActionKind::kSendGrad, st + 1},
                                            std::pair{ActionKind::kRecvGrad, st}}) {
            if (const Pos& at = At(kind, stage, i); at.Found()) {
              return FailAt(absl::StrCat("gradient transfer in a forward-only schedule: ",
                                         Name(kind, stage, i)),
                            at);
            }
          }
          continue;
        }
        PT_RETURN_IF_ERROR(CheckEdge(ActionKind::kSendGrad, st + 1, ActionKind::kRecvGrad, st, i,
                                     Backward(st + 1, i), Backward(st, i)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckOffload() const {
    for (int st = 0; st < s_.num_stages; ++st) {
      for (int i = 0; i < m_; ++i) {
        const Pos& off = At(ActionKind::kOffload, st, i);
        const Pos& rel = At(ActionKind::kReload, st, i);
        const Pos& free = At(ActionKind::kRelease, st, i);
        if (free.Found() && (!off.Found() || free.index < off.index)) {
          return FailAt(absl::StrCat("RELEASE without an OFFLOAD before it: ",
                                     Name(ActionKind::kRelease, st, i)),
                        free, off);
        }
        if (free.Found() && rel.Found() && free.index > rel.index) {
          return FailAt(absl::StrCat("RELEASE after its RELOAD: ",
                                     Name(ActionKind::kRelease, st, i),
                                     " must free the offloaded copy before it comes back"),
                        free, rel);
        }
        if (!off.Found() && !rel.Found()) continue;
        if (s_.forward_only) {
          return FailAt(absl::StrCat("offload in a forward-only schedule (nothing is kept for a "
                                     "backward): ",
                                     Name(off.Found() ? ActionKind::kOffload : ActionKind::kReload,
                                          st, i)),
                        off.Found() ? off : rel);
        }
        const Pos f = At(ActionKind::kF, st, i), bwd = Backward(st, i);
        if (rel.Found() && !off.Found()) {
          return FailAt(absl::StrCat("RELOAD without OFFLOAD: ", Name(ActionKind::kReload, st, i)),
                        rel);
        }
        if (!rel.Found()) {
          return FailAt(absl::StrCat("OFFLOAD without RELOAD: ", Name(ActionKind::kOffload, st, i),
                                     " is never brought back for its backward"),
                        off);
        }
        if (off.index < f.index) {
          return FailAt(absl::StrCat("OFFLOAD before its F: ", Name(ActionKind::kOffload, st, i)),
                        off, f);
        }
        if (rel.index < off.index) {
          return FailAt(
              absl::StrCat("RELOAD before its OFFLOAD: ", Name(ActionKind::kReload, st, i)), rel,
              off);
        }
        if (rel.index > bwd.index) {
          return FailAt(absl::StrCat("RELOAD after the backward that needs it: ",
                                     Name(ActionKind::kReload, st, i)),
                        rel, bwd);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckDeadlock() const {
    CostModel zero;
    StageCost sc;
    sc.f = sc.b = sc.w = 0;
    zero.stages.assign(s_.num_stages, sc);
    const EngineRun run = RunEngine(s_, zero, ScanActions(s_), /*result=*/nullptr);
    if (!run.deadlocked) return absl::OkStatus();
    std::string what = "deadlock: no worker can make progress (cross-worker dependency cycle)";
    std::vector<std::pair<int, int>> marks;
    for (int w = 0; w < s_.num_workers; ++w) {
      if (run.blocked_at[w] < 0) continue;
      marks.push_back({w, run.blocked_at[w]});
      absl::StrAppend(&what, "\n  worker ", w, " step ", run.blocked_at[w], " ",
                      ToString(s_.worker_actions[w][run.blocked_at[w]]), ": ",
                      run.blocked_reason[w]);
    }
    return Fail(what, marks, /*deadlock=*/true);
  }

  const Schedule& s_;
  int m_ = 0;
  size_t n_ = 0;
  std::array<std::vector<int32_t>, kNumActionKinds> pos_;
};

}  // namespace

absl::Status ValidateSchedule(const Schedule& schedule) {
  // Fast path: one untimed engine pass that accepts exactly the valid schedules (without
  // OFFLOAD/RELOAD). Anything it does not accept goes through the full rule-by-rule check,
  // which decides and words the error.
  if (QuickValidate(schedule)) return absl::OkStatus();
  return Validator(schedule).Run();
}

absl::Status ValidateScheduleFull(const Schedule& schedule) { return Validator(schedule).Run(); }

}  // namespace pipetrain::schedule
