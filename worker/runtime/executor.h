// Executor: interprets one worker's action list, every training step. It knows nothing about
// which schedule produced the list; it only follows it and checks the protocol as it goes:
// an F whose input activation has not arrived, a B whose output gradient has not arrived, a
// SEND of a tensor that was never produced, or a tensor left over at the end of the step is a
// FailedPrecondition naming the action and the step.
//
// End of step: after the last action, the ranks agree on whether every weight gradient of the
// step is finite, and only then update (StageRunner::EndStep). A NaN or Inf in any rank's
// gradients skips the update on EVERY rank: updating some stages and not others would leave a
// model that no single-process run computes. Each rank knows only its own gradients, so the
// ranks exchange one flag along the stage chain, over the links the pipeline already has:
//   up:   for stages s = 0..S-1 in order, the rank holding s takes the flag from the rank of
//         s - 1 (if that is another rank), ANDs in its own, and passes it to the rank of s + 1;
//         the rank of the last stage then holds the AND over all ranks (every rank holds some
//         stage, and a flag once cleared stays cleared);
//   down: for s = S-1..0, the same chain backwards hands that result to every rank.
// Each rank walks its own stages in that order (up ascending, then down descending), so every
// receive waits only on an earlier link of the one chain: no cycle, no deadlock. A boundary
// between two stages of one rank carries nothing. It costs 2 x (cross-rank boundaries) one-float
// messages in sequence at the end of each step, and nothing when the runner keeps no gradients
// (emulated compute) or p = 1. The skipped step is reported (StepResult::update_skipped) and
// still counts as a step.
//
// Tensor flow: F/B produce a tensor for the neighbouring stage. If that stage lives on this
// worker the tensor is handed over directly (no transfer, e.g. the V's turn on the last
// worker); otherwise it waits in the outbox for the matching SEND action. RECV actions put what
// arrives into the inbox, where the consuming F/B takes it.
//
// Validation passes: an executor built on a forward-only plan (schedule/forward_only.h) runs
// RunValidation instead of RunStep: its F actions call StageRunner::ValidationForward, nothing
// is kept for a backward, no gradients are checked and no update is made. Its messages carry
// the step -N (N = completed training steps, >= 1), so they can never be taken for a training
// step's, which are numbered from 0.
//
// Thread-safety: not thread-safe; one executor per worker, driven by one thread.
#ifndef PIPETRAIN_WORKER_RUNTIME_EXECUTOR_H_
#define PIPETRAIN_WORKER_RUNTIME_EXECUTOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "schedule/measured_timeline.h"
#include "schedule/schedule.h"
#include "worker/runtime/stage_runner.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

// One executed action's timing, since the step's start (the schedule core's type, so measured
// steps render with the simulator's renderers).
using ActionTiming = schedule::MeasuredAction;

struct ValidationResult {
  int completed_steps = 0;
  std::optional<double> loss;  // on the worker that holds the last stage
  int64_t duration_ns = 0;
};

struct StepResult {
  int step = 0;
  std::optional<double> loss;  // set on the worker that holds the last stage
  int64_t duration_ns = 0;
  int64_t peak_activation_bytes = 0;
  // The device allocator's peak over the step (everything it holds, not only activations).
  int64_t device_peak_bytes = 0;
  int64_t sent_bytes = 0;
  int64_t received_bytes = 0;
  int64_t offloaded_bytes = 0;
  std::vector<ActionTiming> timings;  // one per action, in list order
  // This rank's own weight gradients were all finite (true for a runner without gradients).
  bool gradients_finite = true;
  // Some rank's were not, so every rank skipped this step's optimizer update.
  bool update_skipped = false;
  // The learning rate of this step's update (model::LearningRate; set by the session).
  double learning_rate = 0;
  // A validation pass ran after this step (set by the session, not by RunStep).
  std::optional<ValidationResult> validation;
};

struct ExecutorOptions {
  absl::Duration recv_timeout = absl::Seconds(60);  // bound on any single wait for a peer
  // The job's memory.device_budget_bytes: peak activation bytes this rank may hold (the planner
  // plans for it); a step that goes over fails with ResourceExhausted at the action that did.
  // Weights, gradients, optimizer state and an action's transient buffers are not counted:
  // the budget is the plan's activation budget, as the planner predicts it. 0 = none.
  int64_t activation_budget_bytes = 0;
  // Times the actions and the step; never null.
  const Clock* clock = Clock::Real();
};

class Executor {
 public:
  // `schedule` must have passed ValidateSchedule and carry explicit transfers (AddTransfers)
  // wherever adjacent stages sit on different workers. Not owned: runner, transport.
  Executor(const schedule::Schedule& schedule, int rank, StageRunner* runner,
           Transport* transport, ExecutorOptions options = {});

  absl::StatusOr<StepResult> RunStep(int step);
  // One validation pass after `completed_steps` (>= 1) training steps; the schedule must be
  // forward-only (FailedPrecondition otherwise), and RunStep is refused on one that is.
  absl::StatusOr<ValidationResult> RunValidation(int completed_steps);

 private:
  enum class Slot : uint8_t { kActivation, kGradient };
  struct Key {
    int stage;
    int microbatch;
    Slot slot;
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.stage, k.microbatch, static_cast<int>(k.slot));
    }
  };

  absl::Status Run(const schedule::Action& action, int step, int64_t* bytes);
  // Routes a tensor produced for stage `to_stage` (input of F or output gradient of B there).
  void Deliver(int from_stage, int to_stage, int microbatch, Slot slot, kernels::Tensor tensor);
  absl::StatusOr<kernels::Tensor> TakeInput(const schedule::Action& action, Slot slot,
                                            const char* what);
  // The end-of-step agreement (file comment): true iff every rank's gradients are finite.
  absl::StatusOr<bool> AgreeGradientsFinite(int step, bool local_finite);
  absl::Status SendStepStatus(int step, int from_stage, int to_stage, bool finite);
  absl::StatusOr<bool> RecvStepStatus(int step, int from_stage, int to_stage);

  const schedule::Schedule& schedule_;
  const int rank_;
  StageRunner* runner_;
  Transport* transport_;
  const ExecutorOptions options_;
  absl::flat_hash_map<Key, kernels::Tensor> inbox_;   // keyed by the consuming stage
  absl::flat_hash_map<Key, kernels::Tensor> outbox_;  // keyed by the producing stage
  // (stage, microbatch) of this rank's RELEASE actions: their OFFLOADs are released by them.
  absl::flat_hash_set<int64_t> explicit_release_;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_EXECUTOR_H_
