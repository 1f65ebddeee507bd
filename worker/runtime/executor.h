// Executor: interprets one worker's action list, every training step. It knows nothing about
// which schedule produced the list; it only follows it and checks the protocol as it goes:
// an F whose input activation has not arrived, a B whose output gradient has not arrived, a
// SEND of a tensor that was never produced, or a tensor left over at the end of the step is a
// FailedPrecondition naming the action and the step.
//
// End of step: optimizer post-validation. The update of a step depends on the global norm of
// every rank's weight gradients (clipping; a NaN or Inf anywhere skips it on EVERY rank:
// updating some stages and not others would leave a model that no single-process run
// computes). The norm is a running sum over the stages from the last to stage 0
// (worker/model/gradient_clipping.h), so after the last action the ranks hand it along the
// stage chain, over the links the pipeline already has:
//   sum:     for stages s = S-1..0, the rank holding s takes the partial sum from the rank of
//            s + 1 (if that is another rank), adds its stage's terms and passes it to the rank of
//            s - 1. Each rank walks its own stages in that order, so every receive waits only
//            on an earlier link of the one chain: no cycle, no deadlock. The rank of stage 0 ends
//            with the complete sum and so knows the verdict (norm, clip coefficient, skip) at
//            once; it updates for good and sends the sum on (below).
//   others:  a rank that does not hold stage 0 does NOT wait for the verdict: it updates with
//            what its partial sum tells it (StageRunner::EndStep, model_stage_runner.h: in the
//            common case an unclipped update with a copy of the old state kept) and goes on.
//   verdict: the complete sum travels from the rank of stage 0 to every other rank along a tree:
//            rank R's parent is the rank of stage (lowest stage of R) - 1. A rank receives it at
//            the start of its next step (or at SettlePendingUpdate), forwards it to its
//            children, and settles its update (StageRunner::SettleUpdate): kept, or rolled back
//            from the copy and redone scaled or skipped.
// Why the verdict costs no waiting in the next step: rank R's first compute action of a step is
// an F of its lowest stage, whose input activation comes from R's parent, and the parent sends
// the verdict on before it starts that step's actions; so the verdict is in R's inbox no later
// than the activation it waits for anyway (the rank of stage 0 needs nothing). What remains on
// the critical path is the sum pass at the end of the step (one small message per cross-rank
// stage boundary, in sequence) and, on a rolled-back step, the restore and the redone update.
// Messages: kStepStatus keys, the double split into four 16-bit pieces held exactly as floats.
// Tied embeddings (model.tie_embeddings) whose embedding and head sit on two ranks: before the
// sum pass those two ranks swap the gradients of their copies of the token embedding
// (kTiedGradient, vocab x hidden floats each way) and both add the other's, so both copies take
// the same update and the matrix counts once in the norm (StageRunner::TiedGradient).
// A runner without gradients (emulated) sends nothing; with p = 1 nothing travels either.
// Reports: the rank holding stage 0 sets StepResult::grad_norm, grad_clipped and
// update_skipped; the other ranks learn the verdict a step later and report none of them.

// Data parallelism (ExecutorOptions::replicas, worker/runtime/replica_reducer.h): right after
// the last weight-gradient action (W or BW) of each held stage the stage's gradients are summed
// across the replicas, and after the last action (before the tied-embedding exchange and the
// sum pass) the complete sums are installed, so everything above sees the gradients of the
// whole batch. The executor keeps talking to its own replica's pipeline ranks (the session
// gives it a ReplicaViewTransport).

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
#include "worker/runtime/replica_reducer.h"
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
  // Set on the rank holding stage 0 only (file comment): some rank's gradients were not finite,
  // so every rank skipped this step's optimizer update; the global gradient norm before
  // clipping; whether the gradients were scaled down.
  bool update_skipped = false;
  // The learning rate of this step's update (model::LearningRate; set by the session).
  double learning_rate = 0;
  // A validation pass ran after this step (set by the session, not by RunStep).
  std::optional<ValidationResult> validation;
  std::optional<double> grad_norm;
  bool grad_clipped = false;
  // Data parallelism: this step's gradient sums across replicas, one per held stage.
  std::vector<ReduceTiming> reduce_timings;
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
  // Data parallelism (file comment); null: one pipeline. Not owned.
  ReplicaReducer* replicas = nullptr;
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
  // Waits for the verdict on the last step's update, forwards it and settles the update (file
  // comment); nothing when none is open. RunStep does it first; call it after the last step,
  // and before saving a checkpoint or reading weights.
  absl::Status SettlePendingUpdate();

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
  // The end-of-step sum pass (file comment): this rank's view of the global sum of squares.
  absl::StatusOr<GradientNormPart> SumGradientNorm(int step);
  absl::Status SendSum(int step, int peer, int key_stage, int pass, double sum);
  absl::StatusOr<double> RecvSum(int step, int peer, int key_stage, int pass);
  absl::Status SendVerdict(int step, double sum_squares);
  // Tied embeddings across two ranks (file comment).
  absl::Status ExchangeTiedGradient(int step);

  const schedule::Schedule& schedule_;
  const int rank_;
  StageRunner* runner_;
  Transport* transport_;
  const ExecutorOptions options_;
  absl::flat_hash_map<Key, kernels::Tensor> inbox_;   // keyed by the consuming stage
  absl::flat_hash_map<Key, kernels::Tensor> outbox_;  // keyed by the producing stage
  // (stage, microbatch) of this rank's RELEASE actions: their OFFLOADs are released by them.
  absl::flat_hash_set<int64_t> explicit_release_;
  std::vector<int> my_stages_;  // ascending
  // Data parallelism: per action of this rank's list, whether it is its stage's last
  // weight-gradient action (the stage's gradients are then summed across replicas).
  std::vector<bool> reduce_after_;
  // The verdict tree: the parent's rank (-1 for the rank of stage 0) and the children's ranks.
  int verdict_parent_ = -1;
  std::vector<int> verdict_children_;
  std::optional<int> pending_step_;  // the step whose update waits for its verdict
  // Tied embeddings split between the ranks of stage 0 and the last stage: the other one's
  // rank (-1: no exchange on this rank), and the stages the two copies belong to.
  int tie_peer_ = -1;
  int tie_stage_ = 0;
  int tie_peer_stage_ = 0;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_EXECUTOR_H_
