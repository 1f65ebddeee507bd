// WorkerSession: everything one worker needs to run its part of a job, built from the same
// PrepareRequest the coordinator sends over gRPC (or a plan file, for pipetrain-worker
// --plan): the backend, its stage runner (real GPT chunks, or emulated compute when asked),
// the transport to its pipeline neighbours (TCP; NCCL when the request says so), and the
// executor. Run() drives the steps. The backend is the one of SessionOptions::device: the CPU,
// or a CUDA device.
//
// Checkpoints (real compute only): with spec.checkpoint.dir and interval_steps K > 0, after every
// step whose count of completed steps N is a multiple of K, each rank writes its stages to
// <dir>/step-<N>/stage-<s>.ckpt (atomically, after the optimizer step) before reporting the
// step. A request with checkpoint_path (a checkpoint root like spec.checkpoint.dir) and
// start_step N loads <checkpoint_path>/step-<N>/stage-<s>.ckpt for every held stage at Create.
//
// Evaluation: when the spec evaluates (eval.interval_steps > 0), plan.evaluation is the
// forward-only validation plan (planner::EvaluationPlan), checked here to have the training
// plan's placement; after every step N (completed steps) with EvaluationDue(spec, N),
// after its checkpoint, a second executor runs it on the same runner and transport, and the
// step's result carries the pass (StepResult::validation).
//
// Data parallelism (spec.parallelism.data_parallel d > 1; docs/data_parallel.md): the request's
// replica q and rank s make this worker job rank q * p + s of d x p; the transport links it to
// its replica's pipeline neighbours and to rank s of every other replica, the executor sees its
// replica's pipeline through a ReplicaViewTransport, a ReplicaReducer sums the stage gradients
// across replicas, the runner trains the step's microbatches q * M/d .. (q + 1) * M/d - 1, and
// only replica 0 writes checkpoint files (every replica loads them on a resume).
//
// Thread-safety: not thread-safe; one thread calls Run.
#ifndef PIPETRAIN_WORKER_RUNTIME_WORKER_SESSION_H_
#define PIPETRAIN_WORKER_RUNTIME_WORKER_SESSION_H_

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/lr_schedule.h"
#include "pipetrain/v1/worker.pb.h"
#include "schedule/schedule.h"
#include "worker/data/dataset.h"
#include "worker/device/device_info.h"
#include "worker/runtime/allowed_paths.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/replica_reducer.h"
#include "worker/runtime/stage_profiler.h"
#include "worker/runtime/stage_runner.h"
#include "worker/transport/tcp_transport.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

class ModelStageRunner;

struct SessionOptions {
  // The device it computes on (pipetrain-worker --device); the CPU by default.
  DeviceInfo device;
  // EMULATED compute (sleep for the plan's predicted times; real memory and transfers).
  bool emulate = false;
  int blas_threads = 1;
  absl::Duration connect_timeout = absl::Seconds(30);
  absl::Duration recv_timeout = absl::Seconds(60);
  // Testing only (fault-tolerance tests): when checkpoint step-N with this N is due, write part
  // of one stage file (left as a temp file, as a killed writer leaves it) and SIGKILL this
  // process. Negative: never.
  int crash_in_checkpoint = -1;
  // Host link cap for OFFLOAD/RELOAD copies, bytes/s each way (0 = the copy's own speed).
  double copy_bandwidth_bytes_per_s = 0;
  // Host memory the session may still take, asked at Create (pipetrain-worker: the machine's or
  // its container's available memory); unset or 0: not checked. A CUDA session checks its
  // device's memory instead.
  std::function<int64_t()> available_host_memory_bytes;
  // The directories a job's data and checkpoint paths must lie in (pipetrain-worker --data-root,
  // --checkpoint-root).
  AllowedPaths allowed_paths;
};

class WorkerSession {
 public:
  // Checks the job's paths against options.allowed_paths, validates the plan (an untrusted
  // input), checks that this rank's parameter state and
  // planned activations fit its memory (ResourceExhausted with the numbers, before allocating),
  // binds this rank's address from request.peers (or uses `listener`, already bound to it, when
  // given), builds the chunks and connects to the neighbouring ranks.
  static absl::StatusOr<std::unique_ptr<WorkerSession>> Create(
      const v1::PrepareRequest& request, const SessionOptions& options,
      std::unique_ptr<TcpListener> listener = nullptr);
  ~WorkerSession();

  // Runs steps start_step .. start_step + num_steps - 1, calling on_step after each (a non-OK
  // return stops the run with that status).
  absl::Status Run(int num_steps, const std::function<absl::Status(const StepResult&)>& on_step);

  // Thread-safe: makes a Run in progress stop within moments (a pending wait for a tensor fails
  // at once with `status`) and return `status`.
  void Cancel(absl::Status status);

  // The profiling step (stage_profiler.h): each held stage's F, B and W timed on one microbatch.
  // Call before Run; it leaves no trace in the training.
  absl::StatusOr<std::vector<StageProfile>> Profile(int repeats = 5);

  const schedule::Schedule& schedule() const { return schedule_; }
  int rank() const { return rank_; }
  // Holds the last stage in replica 0 (the rank that reports the step's loss).
  bool holds_loss() const;
  // Data parallelism: where this worker sits (replica 0 of 1 without it).
  const ReplicaPlace& replica() const { return replica_; }
  int64_t parameter_bytes() const { return parameter_bytes_; }
  // Completed-step count N of the last checkpoint this session wrote (step-N), or -1. Read it in
  // Run's on_step: it is updated before on_step of the step that wrote it.
  int64_t last_checkpoint_step() const { return last_checkpoint_step_; }

 private:
  WorkerSession() = default;
  [[noreturn]] void CrashWhileWritingCheckpoint();
  absl::Status RunSteps(int num_steps,
                        const std::function<absl::Status(const StepResult&)>& on_step);
  // The NCCL transport: this replica's pipeline group (ranks 0..p-1, `pipeline_peers`) and,
  // with d > 1, this pipeline rank's stage group across the replicas, as one GroupedTransport
  // speaking job ranks (common/nccl_groups.h).
  static absl::StatusOr<std::unique_ptr<Transport>> ConnectNcclGroups(
      const v1::PrepareRequest& request, const ReplicaPlace& place,
      const std::set<int>& pipeline_peers, const SessionOptions& options);
  // The TCP transport to this rank's neighbours (binding `addresses[rank]` unless `listener`).
  static absl::StatusOr<std::unique_ptr<Transport>> ConnectTcp(
      const v1::PrepareRequest& request, int rank, const std::vector<std::string>& addresses,
      const std::set<int>& peers, const SessionOptions& options,
      std::unique_ptr<TcpListener> listener);

  schedule::Schedule schedule_;
  schedule::Schedule validation_schedule_;  // forward-only; used when validation_executor_ is set
  v1::JobSpec spec_;                        // with defaults
  model::LrSchedule lr_schedule_;
  int rank_ = 0;
  int next_step_ = 0;
  std::vector<int> my_stages_;
  ProfileShape profile_shape_;
  std::atomic<bool> cancelled_{false};
  int64_t parameter_bytes_ = 0;
  std::string checkpoint_dir_;  // empty: no checkpoints
  int checkpoint_interval_ = 0;
  int crash_in_checkpoint_ = -1;
  // Data parallelism: only replica 0 writes the checkpoint files (one copy per stage); the
  // others still count the checkpoint step (last_checkpoint_step).
  bool writes_checkpoints_ = true;
  ReplicaPlace replica_;
  int first_stage_ = 0;  // the lowest stage this rank holds
  int64_t last_checkpoint_step_ = -1;
  ModelStageRunner* model_runner_ = nullptr;  // runner_ when it runs real chunks
  std::unique_ptr<data::Dataset> dataset_;  // null unless this worker holds the first or last stage
  std::unique_ptr<data::Dataset> validation_dataset_;  // the same, and only with evaluation
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<StageRunner> runner_;
  std::unique_ptr<Transport> transport_;  // the job's, with job ranks
  // Data parallelism (d > 1): this replica's view of transport_ for the executors, and the
  // gradient sums across replicas.
  std::unique_ptr<Transport> replica_view_;
  std::unique_ptr<ReplicaReducer> reducer_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Executor> validation_executor_;  // null: the job does not evaluate
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_WORKER_SESSION_H_
