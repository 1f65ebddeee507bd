// RunEngine: the dependency engine shared by ValidateSchedule's dry run and Simulate, so the
// dependency rules exist exactly once (QuickValidate, quick_validate.h, is their timeless twin).
// Internal to the schedule library.
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
// OFFLOAD/RELOAD are issued in list order without worker time; each copy runs on the worker's
// copy engine for its direction (D2H / H2D; one shared engine unless costs.duplex), one at a
// time in issue order, for CostModel::OffloadTime / ReloadTime. A RELOAD's copy also starts no
// earlier than its OFFLOAD's copy ends. The timeline shows a copy's start and end.
// Memory (cost_model.h): F allocates `activation` at its start; B frees `freed_by_b` at its end,
// W the rest at its end, BW all at its end; RELOAD allocates at its issue; at the end of a
// compute action the worker waits for every OFFLOAD copy issued before it (the worker is free
// only at max(compute end, those copies' ends)) and their device copies are released then.
//
// Cost: O(actions + stages + workers) time, 16 bytes per (stage, microbatch) of state (plus 48
// with transfers or offload); Simulate's outputs are written in the same pass. A worker runs until
// an input is missing and then records exactly which completion it waits for; only the action that
// produces that completion wakes it, so every action is visited O(1) times and no worker is polled
// in vain. The result does not depend on the order workers are visited in (each action's times are
// a function of its inputs' times), so the visit order is free: a LIFO stack keeps the producer's
// data hot.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_ENGINE_H_
#define PIPETRAIN_SCHEDULE_ENGINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

struct MemoryEvent {
  double time;
  double delta;
};

struct EngineRun {
  bool deadlocked = false;
  std::vector<int> blocked_at;  // per worker: list index it is stuck at, -1 when finished
  std::vector<std::string> blocked_reason;  // per worker, empty when finished
  // With a SimResult: earliest compute start and latest compute end over all workers
  // (+inf / 0 when there is no compute action).
  double first_start = 0.0, last_end = 0.0;
};

// One pass over every action: which kinds occur (bit 1 << kind) and whether every action's
// stage and microbatch are in range.
struct ActionScan {
  uint32_t kinds = 0;
  bool in_range = true;
  bool misplaced = false;  // some action is in another list than its stage's worker's
  size_t total = 0;        // number of actions
  bool Has(ActionKind kind) const { return kinds & (1u << static_cast<int>(kind)); }
  bool HasTransfers() const;
  bool HasOffload() const;
};

// Range checks the engine relies on (placement size and values, list count, stage and
// microbatch of every action in range, costs sized to the stages). InvalidArgument otherwise.
// `scan` receives the action scan (valid when OK is returned). When `timeline` is non-null it
// is replaced, in the same pass, by one entry per action ordered by (worker, list position),
// with the action and worker set and start = end = -1.
absl::Status CheckEngineInput(const Schedule& schedule, const CostModel& costs, ActionScan* scan,
                              std::vector<TimedAction>* timeline = nullptr);
ActionScan ScanActions(const Schedule& schedule);

// Runs the schedule. `costs` must have one entry per stage and `scan` must come from a
// successful CheckEngineInput. With `result` == nullptr only the deadlock fields are filled
// (the validator's dry run). Otherwise result->timeline must be the one CheckEngineInput filled:
// the engine sets every run action's start and end (unrun ones keep -1), and fills busy, span,
// peak_memory and memory_curve (SimResult's definitions), building the memory step function
// as it goes (a worker whose events do not come in time order is sorted and rebuilt at the end).
EngineRun RunEngine(const Schedule& schedule, const CostModel& costs, const ActionScan& scan,
                    SimResult* result);

// Appends the memory events of one timed compute action (the memory rules above) to `out`.
// OFFLOAD/RELOAD events depend on the worker's other actions and are not produced here.
void AppendMemoryEvents(const TimedAction& action, const StageCost& cost,
                        std::vector<MemoryEvent>* out);

// Whether the schedule carries explicit SEND/RECV actions.
bool HasTransfers(const Schedule& schedule);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_ENGINE_H_
