// Internal to the schedule library: how the dependency engine (engine.cc) and its timeless twin
// QuickValidate (quick_validate.cc) keep track of blocked workers. A worker runs its list until
// an input is missing, records exactly which completion it waits for, and only the action that
// produces that completion wakes it.
#ifndef PIPETRAIN_SCHEDULE_ENGINE_WAITERS_H_
#define PIPETRAIN_SCHEDULE_ENGINE_WAITERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "schedule/action.h"

namespace pipetrain::schedule::engine_internal {

constexpr uint32_t Bit(ActionKind kind) { return 1u << static_cast<int>(kind); }
constexpr uint32_t kTransferBits = Bit(ActionKind::kSendAct) | Bit(ActionKind::kRecvAct) |
                                   Bit(ActionKind::kSendGrad) | Bit(ActionKind::kRecvGrad);
constexpr uint32_t kOffloadBits =
    Bit(ActionKind::kOffload) | Bit(ActionKind::kReload) | Bit(ActionKind::kRelease);

// What a blocked worker waits for: one field of one (stage, microbatch) slot, as
// key * 8 + field. kRunnable: on the stack or running; kFinished: its list is done.
constexpr uint64_t kRunnable = ~uint64_t{0};
constexpr uint64_t kFinished = kRunnable - 1;
enum Field : uint64_t {
  kFEnd = 0,         // F done (timed: f_end)
  kBwdEnd = 1,       // B or BW done
  kActArrival = 2,   // SEND_F of the previous stage issued (untimed) / arrived (timed)
  kGradArrival = 3,  // SEND_B of the next stage issued / arrived
  kRecvActDone = 4,
  kRecvGradDone = 5,
  kOffloadEnd = 6,
  kReloadEnd = 7,
};
constexpr uint64_t WaitId(size_t key, Field field) {
  return static_cast<uint64_t>(key) * 8 + field;
}

// The runnable workers (a LIFO stack, each worker at most once) and what the others wait for.
class Waiters {
 public:
  // broadcast: some action sits in another worker's list than its stage's (an invalid
  // schedule Simulate is still asked to run); its waiter is then found by a scan.
  Waiters(int p, bool broadcast) : broadcast_(broadcast), wait_(p, kRunnable) {
    stack_.reserve(p);
    for (int w = p - 1; w >= 0; --w) stack_.push_back(w);
  }
  bool Pop(int* w) {
    if (stack_.empty()) return false;
    *w = stack_.back();
    stack_.pop_back();
    return true;
  }
  void Block(int w, uint64_t id) { wait_[w] = id; }
  void Finish(int w) { wait_[w] = kFinished; }
  // Completion `id` happened: resume worker u if that is what it waits for.
  void Signal(int u, uint64_t id) {
    if (broadcast_) {
      for (int v = 0; v < static_cast<int>(wait_.size()); ++v) Wake(v, id);
    } else {
      Wake(u, id);
    }
  }

 private:
  void Wake(int u, uint64_t id) {
    if (wait_[u] == id) {
      wait_[u] = kRunnable;
      stack_.push_back(u);
    }
  }

  const bool broadcast_;
  std::vector<uint64_t> wait_;
  std::vector<int> stack_;
};

}  // namespace pipetrain::schedule::engine_internal

#endif  // PIPETRAIN_SCHEDULE_ENGINE_WAITERS_H_
