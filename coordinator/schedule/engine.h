// RunEngine: the dependency engine shared by ValidateSchedule's dry run and Simulate, so the
// dependency rules exist exactly once. Internal to the schedule library.
//
// Every worker runs its list in order. An action starts when the worker is free and its input
// is ready:
//   F(s,i)     after F(s-1,i) (+comm across workers)
//   B/BW(s,i)  after F(s,i) and B/BW(s+1,i) (+comm across workers); last stage: after F only;
//              after RELOAD(s,i) when the activations were offloaded
//   W(s,i)     after B(s,i)
// With explicit transfers (any SEND/RECV present) a cross-worker input is the matching RECV on
// the consumer's worker instead: SEND takes no worker time and its message arrives `comm` after
// it is issued (sends are buffered, never block); RECV blocks its worker until arrival.
// OFFLOAD/RELOAD are issued in list order without worker time and run one at a time on the
// worker's copy engine (duration costs.offload / costs.reload).
// Memory (cost_model.h): F allocates `activation` at its start; B frees `freed_by_b` at its end,
// W the rest at its end, BW all at its end; OFFLOAD frees at its end, RELOAD allocates at start.
//
// The engine visits each action O(1) times: when an action finishes only the workers holding
// the neighbouring stages can be unblocked, so only they are re-examined.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COORDINATOR_SCHEDULE_ENGINE_H_
#define PIPETRAIN_COORDINATOR_SCHEDULE_ENGINE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/schedule/cost_model.h"
#include "coordinator/schedule/schedule.h"

namespace pipetrain::schedule {

struct MemoryEvent {
  double time;
  double delta;
};

struct EngineRun {
  // Per worker, per list index. Unrun actions (deadlock) keep -1.
  std::vector<std::vector<double>> start, end;
  std::vector<std::vector<MemoryEvent>> memory_events;  // per worker, unsorted
  bool deadlocked = false;
  std::vector<int> blocked_at;  // per worker: list index it is stuck at, -1 when finished
  std::vector<std::string> blocked_reason;  // per worker, empty when finished
};

// Range checks the engine relies on (placement size and values, list count, stage and
// microbatch of every action in range, costs sized to the stages). InvalidArgument otherwise.
absl::Status CheckEngineInput(const Schedule& schedule, const CostModel& costs);

// Runs the schedule. `costs` must have one entry per stage (CheckEngineInput first). With
// record = false only the deadlock fields are filled (the validator's dry run).
EngineRun RunEngine(const Schedule& schedule, const CostModel& costs, bool record = true);

// Whether the schedule carries explicit SEND/RECV actions.
bool HasTransfers(const Schedule& schedule);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_COORDINATOR_SCHEDULE_ENGINE_H_
