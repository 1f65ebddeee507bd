#include "schedule/quick_validate.h"

#include <cstdint>
#include <vector>

#include "schedule/engine_waiters.h"

namespace pipetrain::schedule {

using engine_internal::Bit;
using engine_internal::kTransferBits;
using engine_internal::kOffloadBits;
using engine_internal::kRunnable;
using engine_internal::kFEnd;
using engine_internal::kBwdEnd;
using engine_internal::kActArrival;
using engine_internal::kGradArrival;
using engine_internal::WaitId;
using engine_internal::Waiters;

// The dependency rules of Engine::Run without times, plus per-slot bookkeeping of which
// actions have run (one byte per (stage, microbatch): the eight compute and transfer kinds).
// Any irregularity returns false at once; the full validator then finds and words it.
bool QuickValidate(const Schedule& s) {
  const int p = s.num_workers, n_stages = s.num_stages, m = s.num_microbatches;
  // Forward-only plans are small and rare: the full validator decides them.
  if (s.forward_only) return false;
  if (p < 1 || static_cast<int>(s.worker_actions.size()) != p || n_stages < 1 || m < 1 ||
      static_cast<int>(s.stage_to_worker.size()) != n_stages) {
    return false;
  }
  for (int w : s.stage_to_worker) {
    if (w < 0 || w >= p) return false;
  }
  uint32_t kinds = 0;
  for (const auto& list : s.worker_actions) {
    for (const Action& a : list) kinds |= Bit(a.kind);
  }
  if (kinds & kOffloadBits) return false;
  const bool explicit_transfers = (kinds & kTransferBits) != 0;
  constexpr uint8_t kF = 1, kB = 2, kW = 4, kBW = 8, kSendF = 16, kRecvF = 32, kSendB = 64,
                    kRecvB = 128;
  std::vector<uint8_t> done(static_cast<size_t>(n_stages) * m, 0);
  uint8_t* const state = done.data();
  const int* const place = s.stage_to_worker.data();
  std::vector<int> pos(p, 0);
  Waiters waiters(p, /*broadcast=*/false);  // misplaced actions are rejected below
  int w = 0;
  while (waiters.Pop(&w)) {
    const Action* actions = s.worker_actions[w].data();
    const int n = static_cast<int>(s.worker_actions[w].size());
    int k = pos[w];
    uint64_t missing = kRunnable;
    for (; k < n; ++k) {
      const Action a = actions[k];
      const int st = a.stage;
      if (static_cast<unsigned>(st) >= static_cast<unsigned>(n_stages) ||
          static_cast<unsigned>(a.microbatch) >= static_cast<unsigned>(m) || place[st] != w) {
        return false;
      }
      const size_t key = static_cast<size_t>(a.microbatch) * n_stages + st;
      uint8_t& mine = state[key];
      switch (a.kind) {
        case ActionKind::kOverlapF:  // an F whose pair backward must come right after it
          if (k + 1 >= n || (actions[k + 1].kind != ActionKind::kB &&
                             actions[k + 1].kind != ActionKind::kBW)) {
            return false;
          }
          [[fallthrough]];
        case ActionKind::kF:
          if (mine & kF) return false;
          if (st > 0) {
            if (place[st - 1] != w && explicit_transfers) {
              if (!(mine & kRecvF)) return false;  // RECV_F missing or after this F
            } else if (!(state[key - 1] & kF)) {
              missing = WaitId(key - 1, kFEnd);
              break;
            }
          }
          mine |= kF;
          if (st + 1 < n_stages) waiters.Signal(place[st + 1], WaitId(key, kFEnd));
          break;
        case ActionKind::kB:
        case ActionKind::kBW:
          if ((mine & (kF | kB | kBW)) != kF) return false;  // F later/missing, or duplicate
          if (st + 1 < n_stages) {
            if (place[st + 1] != w && explicit_transfers) {
              if (!(mine & kRecvB)) return false;
            } else if (!(state[key + 1] & (kB | kBW))) {
              missing = WaitId(key + 1, kBwdEnd);
              break;
            }
          }
          mine |= a.kind == ActionKind::kB ? kB : kBW;
          if (st > 0) waiters.Signal(place[st - 1], WaitId(key, kBwdEnd));
          break;
        case ActionKind::kW:
          if ((mine & (kB | kW)) != kB) return false;
          mine |= kW;
          break;
        case ActionKind::kSendAct:
          if (st + 1 >= n_stages || place[st + 1] == w) return false;
          if ((mine & (kF | kSendF)) != kF) return false;
          mine |= kSendF;
          waiters.Signal(place[st + 1], WaitId(key + 1, kActArrival));
          break;
        case ActionKind::kRecvAct:
          if (st == 0 || place[st - 1] == w) return false;
          if (mine & (kRecvF | kF)) return false;
          if (!(state[key - 1] & kSendF)) {
            missing = WaitId(key, kActArrival);
            break;
          }
          mine |= kRecvF;
          break;
        case ActionKind::kSendGrad:
          if (st == 0 || place[st - 1] == w) return false;
          if ((mine & kSendB) || !(mine & (kB | kBW))) return false;
          mine |= kSendB;
          waiters.Signal(place[st - 1], WaitId(key - 1, kGradArrival));
          break;
        case ActionKind::kRecvGrad:
          if (st + 1 >= n_stages || place[st + 1] == w) return false;
          if (mine & (kRecvB | kB | kBW)) return false;
          if (!(state[key + 1] & kSendB)) {
            missing = WaitId(key, kGradArrival);
            break;
          }
          mine |= kRecvB;
          break;
        default:
          return false;
      }
      if (missing != kRunnable) break;
    }
    pos[w] = k;
    if (k == n) {
      waiters.Finish(w);
    } else {
      waiters.Block(w, missing);
    }
  }
  for (int u = 0; u < p; ++u) {
    if (pos[u] != static_cast<int>(s.worker_actions[u].size())) return false;  // deadlock
  }
  // Completeness: every slot has its F and either B + W or BW. Transfers need no sweep: each
  // cross-worker F or backward above required its RECV, which required its SEND.
  for (const uint8_t x : done) {
    if (!(x & kF) || ((x & (kB | kW)) != (kB | kW) && !(x & kBW))) return false;
  }
  return true;
}

}  // namespace pipetrain::schedule
