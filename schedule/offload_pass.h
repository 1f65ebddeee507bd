// Offload pass: inserts OFFLOAD/RELOAD into a compute-only schedule (PipeOffload, arXiv 2503.01328).
//
// Candidates are the stashes F(s,i) -> first backward B/BW(s,i) on each worker. Their lifespan
// is the idle-or-busy time between F's end and the backward's start in the simulated base
// schedule. A stash is eligible when its lifespan can hide a round trip with slack:
// lifespan >= min_lifespan_factor * (OffloadTime + ReloadTime) (CostModel terms). Shorter
// ones are skipped: their copies would delay the backward or free nothing.
//
// Copy-engine booking (per worker, on the base timeline): the chosen stashes' D2H copies are
// booked in F order on the D2H engine (FIFO, as issued). The executor waits for a copy at the end
// of the compute action after its F (cost_model.h). Strict booking drops a copy that would not
// end by then; waiting booking keeps it, and the wait postpones the worker's next action (in the
// warm-up that is the next forward: PipeOffload's "postpone warm-up forwards", done by the IR's
// own wait rule, so the simulator and the runtime execute the same thing). Their H2D copies as late as possible
// in reverse backward order on the H2D engine, ending by the backward's start
// (lead_factor * ReloadTime before it at the latest); both directions on one engine when the
// cost model is not duplex. A stash whose reload would have to start before its offload's copy
// ends frees nothing and is dropped (engine saturated, e.g. warm-up bursts at k near 1).
// Insertion: OFFLOAD right after the F (AddTransfers later puts SEND_F between them);
// RELOAD before the latest action on the worker whose predecessor ends (in the base
// simulation) no later than the booked reload start. The output is re-simulated; a reload
// that still finishes after its backward would have started gets its lead raised by the
// lateness (a few rounds).
//
// Modes:
//   full       every eligible stash (PO-F)
// The partial modes take each worker's eligible stashes in a greedy re-simulated order: each
// round adds the stashes whose offloaded window covers the most of the worker's current peak
// moments (longest lifespan first among equals), re-plans and re-simulates, so the next round
// follows the peak wherever it moved (about 32 rounds; the curve falls faster than linearly).
//   half       per worker, the first eligible stashes in that order up to half of the worker's
//              stashes (PO-H)
//   selective  per worker, the first eligible stashes in that order, fewest first, until the
//              worker's simulated peak <= memory_limit; ResourceExhausted (with the smallest
//              peak full offload reaches) when even all eligible ones do not get there
//   fraction   per worker, the first ceil(fraction * stashes) eligible ones in that order
//              (the selective curve, bench/offload)
// Every mode but none plans three bookings and keeps, among those whose simulated step time is
// within (1 + max_slowdown) of the schedule without offload, the one with the lowest peak
// (ties: the simpler): strict; waiting (warm-up forwards with slack, e.g. 1F1B: flat peak up to
// k = 4/3 at no cost); explicit release (RELEASE actions: 1F1B flat up to k = 1.9, a copy each
// way taking 95% of F+B+W).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_OFFLOAD_PASS_H_
#define PIPETRAIN_SCHEDULE_OFFLOAD_PASS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

enum class OffloadMode { kNone, kHalf, kFull, kSelective, kFraction };

// "none", "half", "full", "selective"; InvalidArgument listing them otherwise.
absl::StatusOr<OffloadMode> ParseOffloadMode(absl::string_view name);
const char* OffloadModeName(OffloadMode mode);

struct OffloadOptions {
  OffloadMode mode = OffloadMode::kFull;
  double memory_limit = 0.0;  // selective: target peak per worker (cost-model units)
  double fraction = 1.0;      // fraction mode, 0..1
  double min_lifespan_factor = 2.0;
  double lead_factor = 1.5;
  // Step time the copy waits may add (fraction of the schedule's without offload).
  double max_slowdown = 0.01;
  // Internal to the pass's bookings: keep D2H copies that make the worker wait ...
  bool wait_for_copies = false;
  // ... or keep them all and free each device copy with a RELEASE placed where the copy is
  // booked to be done, at the latest before the second forward after the stash's F (so the
  // warm-up forwards wait for the link, as with waiting, but a steady-state copy longer than
  // the next compute does not stall the worker).
  bool explicit_release = false;
};

struct OffloadCandidate {
  int worker = 0, stage = 0, microbatch = 0;
  double lifespan = 0.0;  // base simulation: backward start - F end
  bool eligible = false;
};

struct OffloadPlan {
  Schedule schedule;  // compute + OFFLOAD/RELOAD
  SimResult sim;      // of `schedule` under the costs given
  int offloaded = 0;  // stashes offloaded
  int stashes = 0;    // all stashes (stage, microbatch) of the schedule
  int eligible = 0;
};

// Every stash of a compute-only schedule, per worker, longest lifespan first.
absl::StatusOr<std::vector<std::vector<OffloadCandidate>>> OffloadCandidates(
    const Schedule& compute, const CostModel& costs, const OffloadOptions& options);

// Inserts OFFLOAD/RELOAD for `chosen` (a subset of the candidates) minus those the copy-engine
// booking drops, and times them; OffloadPlan::offloaded says how many were kept.
absl::StatusOr<OffloadPlan> InsertOffloads(const Schedule& compute, const CostModel& costs,
                                           const std::vector<OffloadCandidate>& chosen,
                                           const OffloadOptions& options);

// The pass: chooses the stashes by `options.mode` and inserts them. Input must be a valid
// compute-only schedule (InvalidArgument otherwise). Mode none returns the input, simulated.
absl::StatusOr<OffloadPlan> AddOffload(const Schedule& compute, const CostModel& costs,
                                       const OffloadOptions& options);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_OFFLOAD_PASS_H_
