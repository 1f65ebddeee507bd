#include "worker/runtime/worker_session.h"

#include <signal.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/checkpoint_layout.h"
#include "model/cost_model.h"
#include "model/job_model.h"
#include "model/job_spec_validation.h"
#include "model/lr_schedule.h"
#include "schedule/codec/plan_proto.h"
#include "worker/device/compute_backend.h"
#include "worker/model/chunk_checkpoint.h"
#include "worker/model/exported_weights.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/job_config.h"
#include "worker/runtime/model_stage_runner.h"
#include "worker/runtime/rank_memory.h"
#include "worker/transport/grouped_transport.h"
#include "worker/transport/nccl_link.h"
#include "worker/transport/replica_view_transport.h"
#include "worker/transport/tcp_transport.h"

namespace pipetrain::worker {
namespace {

// Refuses, before anything is allocated, a rank whose parameters with their gradients and AdamW
// moments, a later replica's buffered gradients and the plan's predicted activation peak exceed
// the memory it computes in (rank_memory.h): a typo such as a vocabulary of millions would
// otherwise allocate (and fill) tensors until the process is killed.
absl::Status CheckMemoryFits(const v1::PrepareRequest& request, const model::GptConfig& config,
                             const std::vector<int>& stages, int num_stages,
                             const SessionOptions& options) {
  int64_t available = 0;
  std::string where;
  if (options.device.kind == v1::DEVICE_KIND_CUDA) {
    available = options.device.total_memory_bytes;
    where = absl::StrCat("the memory of ", Describe(options.device));
  } else if (options.available_host_memory_bytes) {
    available = options.available_host_memory_bytes();
    where = "this worker's available host memory";
  }
  if (available <= 0) return absl::OkStatus();  // unknown: not checked
  PT_ASSIGN_OR_RETURN(const RankMemory need,
                      EstimateRankMemory(request, config, stages, num_stages));
  if (need.total() <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "model: rank ", request.rank(), "'s stages need ", need.total(), " bytes (",
      need.parameter_state_bytes, " for parameters, gradients and AdamW moments, ",
      need.buffered_gradient_bytes > 0
          ? absl::StrCat(need.buffered_gradient_bytes, " for replica ", request.replica(),
                         "'s buffered gradients until the running sum arrives, ")
          : std::string(),
      need.activation_bytes, " for activations at the plan's peak), over the ", available,
      " bytes of ", where,
      "; use more workers (parallelism.num_workers), a smaller model, or a worker with more "
      "memory"));
}

}  // namespace

WorkerSession::~WorkerSession() {
  // The executor refers to the runner and transport; tear down in dependency order.
  executor_.reset();
  validation_executor_.reset();
  reducer_.reset();
  replica_view_.reset();
  transport_.reset();
  runner_.reset();
}

bool WorkerSession::holds_loss() const {
  return schedule_.WorkerOf(schedule_.num_stages - 1) == rank_ && replica_.replica == 0;
}

absl::StatusOr<std::unique_ptr<WorkerSession>> WorkerSession::Create(
    const v1::PrepareRequest& request, const SessionOptions& options,
    std::unique_ptr<TcpListener> listener) {
  // A worker trusts no caller with its memory or files: every field is checked here as the
  // coordinator checked it at submit (a plan file, or a caller that is not our coordinator,
  // reaches this point without that check).
  PT_RETURN_IF_ERROR(model::ValidateJobSpec(request.spec()));
  if (request.start_step() < 0 || request.start_step() > request.spec().training().steps()) {
    return absl::InvalidArgumentError(absl::StrCat("start_step: ", request.start_step(),
                                                   " is outside 0..training.steps (",
                                                   request.spec().training().steps(), ")"));
  }
  // Before anything is opened: the job names paths, this worker decides which it may touch.
  const AllowedPaths& allowed = options.allowed_paths;
  PT_RETURN_IF_ERROR(CheckPathUnder("training.data.path", request.spec().training().data().path(),
                                    allowed.data_root, "--data-root"));
  PT_RETURN_IF_ERROR(CheckPathUnder("checkpoint.dir", request.spec().checkpoint().dir(),
                                    allowed.checkpoint_root, "--checkpoint-root"));
  PT_RETURN_IF_ERROR(CheckPathUnder("checkpoint_path", request.checkpoint_path(),
                                    allowed.checkpoint_root, "--checkpoint-root"));
  // Weights to start from are read like data.
  PT_RETURN_IF_ERROR(CheckPathUnder("model.init_from", request.spec().model().init_from(),
                                    allowed.data_root, "--data-root"));
  auto session = std::unique_ptr<WorkerSession>(new WorkerSession());
  PT_ASSIGN_OR_RETURN(session->schedule_, schedule::ScheduleFromProto(request.plan()));
  const schedule::Schedule& sched = session->schedule_;
  session->spec_ = model::WithDefaults(request.spec());
  PT_ASSIGN_OR_RETURN(session->lr_schedule_, model::LrScheduleOf(session->spec_));
  const bool evaluate = session->spec_.eval().interval_steps() > 0;
  if (evaluate) {
    if (!request.plan().has_evaluation()) {
      return absl::InvalidArgumentError(
          "plan.evaluation: the job evaluates (eval.interval_steps > 0) but the plan has no "
          "validation plan; plan it again with this pipetrain");
    }
    absl::StatusOr<schedule::Schedule> validation =
        schedule::ScheduleFromProto(request.plan().evaluation());
    if (!validation.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.evaluation: ", validation.status().message()));
    }
    if (!validation->forward_only || validation->stage_to_worker != sched.stage_to_worker ||
        validation->num_workers != sched.num_workers) {
      return absl::InvalidArgumentError(
          "plan.evaluation: must be forward-only on the training plan's placement");
    }
    session->validation_schedule_ = *std::move(validation);
  }
  const int rank = request.rank();
  session->rank_ = rank;
  session->next_step_ = request.start_step();
  if (rank < 0 || rank >= sched.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", rank, " is outside 0..", sched.num_workers - 1));
  }
  // Data parallelism: d replicas of the plan's pipeline, job rank q * p + s (replica_reducer.h).
  const int replicas = model::DataParallelSize(request.spec());
  if (request.replica() < 0 || request.replica() >= replicas) {
    return absl::InvalidArgumentError(absl::StrCat("replica: ", request.replica(),
                                                   " is outside 0..", replicas - 1,
                                                   " (parallelism.data_parallel ", replicas, ")"));
  }
  const int job_ranks = replicas * sched.num_workers;
  if (replicas > 1 && sched.num_microbatches * replicas != model::NumMicrobatches(request.spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.num_microbatches: ", sched.num_microbatches, " per replica, but the spec's ",
        model::NumMicrobatches(request.spec()), " microbatches per step over ", replicas,
        " replicas make ", model::MicrobatchesPerReplica(request.spec())));
  }
  session->replica_ = ReplicaPlace{request.replica(), replicas, rank, sched.num_workers};
  const int job_rank = session->replica_.JobRank(request.replica());
  if (request.peers_size() != job_ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peers: ", request.peers_size(), " given, the job has ", job_ranks, " workers (",
        replicas, " replica(s) of ", sched.num_workers, " pipeline ranks)"));
  }
  std::vector<std::string> addresses(job_ranks);
  for (const v1::Peer& peer : request.peers()) {
    if (peer.rank() < 0 || peer.rank() >= job_ranks) {
      return absl::InvalidArgumentError(
          absl::StrCat("peers[].rank: ", peer.rank(), " is outside 0..", job_ranks - 1));
    }
    addresses[peer.rank()] = peer.address();
  }
  const int m = sched.num_microbatches;
  // The job must run on this worker's kind of device (the coordinator only assigns matching
  // workers; a plan file can name any).
  const v1::DeviceKind required = model::RequiredDeviceKind(request.spec());
  const v1::DeviceKind mine = options.emulate ? v1::DEVICE_KIND_EMULATED : options.device.kind;
  if (required != v1::DEVICE_KIND_UNSPECIFIED && required != mine) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute.device: the job needs ", v1::DeviceKind_Name(required), ", this worker is ",
        v1::DeviceKind_Name(mine), " (", Describe(options.device), ")"));
  }
  // The replicas' gradient sums need real gradients to sum.
  if (replicas > 1 && options.emulate) {
    return absl::InvalidArgumentError(absl::StrCat("parallelism.data_parallel: ", replicas,
                                                   " replicas need real compute (CPU or CUDA); "
                                                   "this worker emulates it; use data_parallel 1"));
  }
  ComputeBackendOptions backend_options;
  backend_options.blas_threads = options.blas_threads;
  backend_options.bf16_gemm = request.spec().compute().precision() == v1::PRECISION_BF16;
  PT_ASSIGN_OR_RETURN(session->backend_, MakeComputeBackend(options.emulate ? DeviceInfo{}
                                                                           : options.device,
                                                            backend_options));

  std::vector<int> my_stages;
  std::set<int> pipeline_peers;  // pipeline ranks of this replica this one exchanges with
  for (int s = 0; s < sched.num_stages; ++s) {
    if (sched.WorkerOf(s) != rank) continue;
    my_stages.push_back(s);
    for (int n : {s - 1, s + 1}) {
      if (n >= 0 && n < sched.num_stages && sched.WorkerOf(n) != rank) {
        pipeline_peers.insert(sched.WorkerOf(n));
      }
    }
  }
  // Tied embeddings: the ranks of the first and the last stage swap their copies' gradients
  // every step (executor.h), so they need a link even where they are not neighbours.
  const int first_rank = sched.WorkerOf(0), last_rank = sched.WorkerOf(sched.num_stages - 1);
  if (request.spec().model().tie_embeddings() && first_rank != last_rank &&
      (rank == first_rank || rank == last_rank)) {
    pipeline_peers.insert(rank == first_rank ? last_rank : first_rank);
  }
  // The job's transport speaks job ranks: this replica's pipeline neighbours, plus this
  // pipeline rank in the other replicas (the gradient sums and losses).
  std::set<int> peers;
  for (int n : pipeline_peers) peers.insert(session->replica_.replica * sched.num_workers + n);
  const std::vector<int> replica_peers = ReplicaPeers(session->replica_);
  peers.insert(replica_peers.begin(), replica_peers.end());

  // Only the embedding (first stage) and the loss (last stage) read training data: the other
  // workers never open it (docs/data.md).
  const bool reads_data = std::any_of(my_stages.begin(), my_stages.end(), [&](int s) {
    return s == 0 || s == sched.num_stages - 1;
  });
  if (reads_data) {
    PT_ASSIGN_OR_RETURN(JobData job_data, OpenJobData(request.spec()));
    session->dataset_ = std::move(job_data.train);
    session->validation_dataset_ = std::move(job_data.validation);
  }
  PT_ASSIGN_OR_RETURN(model::GptConfig config, model::ModelConfig(request.spec()));
  session->my_stages_ = my_stages;
  session->profile_shape_.num_stages = sched.num_stages;
  session->profile_shape_.rows =
      int64_t{request.spec().training().microbatch_size()} * config.seq_len;
  session->profile_shape_.hidden = config.hidden;
  session->profile_shape_.step = request.start_step();
  if (options.emulate) {
    EmulatedStageConfig emulated;
    emulated.costs = schedule::CostModelFromProto(request.plan());
    emulated.bytes_per_unit = 1.0;  // the plan stores bytes
    emulated.copy_bandwidth_bytes_per_s = options.copy_bandwidth_bytes_per_s;
    emulated.boundary_elements =
        int64_t{request.spec().training().microbatch_size()} * config.seq_len * config.hidden;
    session->runner_ =
        std::make_unique<EmulatedStageRunner>(session->backend_.get(), sched.num_stages, emulated);
    if (!request.checkpoint_path().empty()) {
      return absl::InvalidArgumentError(
          "checkpoint_path: emulated compute has no weights to resume from");
    }
    if (!request.spec().model().init_from().empty()) {
      return absl::InvalidArgumentError(
          "model.init_from: emulated compute has no weights to load");
    }
  } else {
    PT_RETURN_IF_ERROR(CheckMemoryFits(request, config, my_stages, sched.num_stages, options));
    ModelStageConfig mc;
    mc.model = config;
    mc.chunk.seed = request.spec().training().seed();
    mc.chunk.stash_bf16 = request.spec().compute().precision() == v1::PRECISION_BF16;
    PT_ASSIGN_OR_RETURN(mc.optimizer, OptimizerSettingsOf(request.spec()));
    mc.num_stages = sched.num_stages;
    mc.num_microbatches = m * replicas;  // the step's, over every replica
    mc.microbatch_offset = request.replica() * m;
    mc.stages = my_stages;
    mc.copy_bandwidth_bytes_per_s = options.copy_bandwidth_bytes_per_s;
    if (const data::Dataset* dataset = session->dataset_.get(); dataset != nullptr) {
      const int mbs = request.spec().training().microbatch_size();
      mc.data = [dataset, mbs](int step, int mb) -> absl::StatusOr<MicrobatchData> {
        data::Microbatch batch = TrainingMicrobatch(*dataset, step, mb, mbs);
        return MicrobatchData{std::move(batch.tokens), std::move(batch.targets)};
      };
    }
    if (const data::Dataset* validation = session->validation_dataset_.get();
        validation != nullptr) {
      const int mbs = request.spec().training().microbatch_size();
      mc.validation_data = [validation, mbs](int /*completed_steps*/,
                                             int mb) -> absl::StatusOr<MicrobatchData> {
        data::Microbatch batch = data::ValidationMicrobatch(*validation, mb, mbs);
        return MicrobatchData{std::move(batch.tokens), std::move(batch.targets)};
      };
    }
    mc.validation_batches = session->validation_schedule_.num_microbatches;
    PT_ASSIGN_OR_RETURN(auto runner, ModelStageRunner::Create(session->backend_.get(), mc));
    for (int s : my_stages) {
      session->parameter_bytes_ += runner->chunk(s)->ParameterStateBytes();
    }
    if (!request.checkpoint_path().empty()) {
      PT_RETURN_IF_ERROR(runner->LoadCheckpoint(request.checkpoint_path(), request.start_step()));
    } else if (const std::string& init_from = request.spec().model().init_from();
               !init_from.empty()) {
      // A fresh start from exported weights (a resumed run has its own checkpoint instead).
      std::vector<model::GptChunk*> chunks;
      for (int s : my_stages) chunks.push_back(runner->chunk(s));
      PT_RETURN_IF_ERROR(model::LoadExportedWeights(init_from, chunks));
    }
    const v1::CheckpointSpec& ckpt = request.spec().checkpoint();
    if (!ckpt.dir().empty() && ckpt.interval_steps() > 0) {
      session->checkpoint_dir_ = ckpt.dir();
      session->checkpoint_interval_ = ckpt.interval_steps();
      session->crash_in_checkpoint_ = options.crash_in_checkpoint;
      // One copy per stage: replica 0 writes it, the others hold the same weights.
      session->writes_checkpoints_ = request.replica() == 0;
      session->first_stage_ = my_stages.empty() ? 0 : my_stages.front();
    }
    session->model_runner_ = runner.get();
    session->runner_ = std::move(runner);
  }

  if (request.transport() == v1::TRANSPORT_KIND_NCCL) {
    if (mine != v1::DEVICE_KIND_CUDA) {
      return absl::InvalidArgumentError(absl::StrCat(
          "transport: NCCL needs a CUDA worker; this one is ", v1::DeviceKind_Name(mine)));
    }
    PT_ASSIGN_OR_RETURN(session->transport_,
                        ConnectNcclGroups(request, session->replica_, pipeline_peers, options));
  } else {
    PT_ASSIGN_OR_RETURN(session->transport_, ConnectTcp(request, job_rank, addresses, peers,
                                                        options, std::move(listener)));
  }
  Transport* pipeline_transport = session->transport_.get();
  ExecutorOptions executor_options{options.recv_timeout,
                                   request.spec().memory().device_budget_bytes()};
  if (replicas > 1) {
    session->replica_view_ = std::make_unique<ReplicaViewTransport>(
        session->transport_.get(), request.replica() * sched.num_workers);
    pipeline_transport = session->replica_view_.get();
    session->reducer_ = std::make_unique<ReplicaReducer>(
        session->replica_, my_stages, sched.num_stages - 1, m, session->runner_.get(),
        session->transport_.get(), options.recv_timeout);
  }
  ExecutorOptions training_options = executor_options;
  training_options.replicas = session->reducer_.get();
  session->executor_ = std::make_unique<Executor>(session->schedule_, rank, session->runner_.get(),
                                                  pipeline_transport, training_options);
  if (evaluate) {
    session->validation_executor_ =
        std::make_unique<Executor>(session->validation_schedule_, rank, session->runner_.get(),
                                   pipeline_transport, executor_options);
  }
  return session;
}

absl::StatusOr<std::unique_ptr<Transport>> WorkerSession::ConnectNcclGroups(
    const v1::PrepareRequest& request, const ReplicaPlace& place,
    const std::set<int>& pipeline_peers, const SessionOptions& options) {
  if (place.pipeline_ranks * place.replicas < 2) {
    return absl::InvalidArgumentError(
        "transport: NCCL links ranks, and this job has one; use TCP (the coordinator does)");
  }
  NcclLinkOptions link;
  link.device = options.device.index;
  link.connect_timeout = options.connect_timeout;
  link.timeout = options.recv_timeout;
  // Every rank joins its pipeline group first, then its stage group: the pipeline groups are
  // disjoint, so all of them complete before any stage group waits for its members.
  std::unique_ptr<Transport> pipeline, stage;
  if (place.pipeline_ranks > 1) {
    NcclLinkOptions nccl = link;
    nccl.rank = place.pipeline_rank;
    nccl.world_size = place.pipeline_ranks;
    nccl.unique_id = request.nccl_unique_id();
    nccl.peers.assign(pipeline_peers.begin(), pipeline_peers.end());
    PT_ASSIGN_OR_RETURN(pipeline, ConnectNccl(nccl));
  }
  if (place.replicas == 1) return pipeline;
  if (request.nccl_stage_unique_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl_stage_unique_id: empty; NCCL with parallelism.data_parallel ", place.replicas,
        " needs the id of pipeline rank ", place.pipeline_rank, "'s stage group"));
  }
  NcclLinkOptions nccl = link;
  nccl.rank = place.replica;
  nccl.world_size = place.replicas;
  nccl.unique_id = request.nccl_stage_unique_id();
  for (int q = 0; q < place.replicas; ++q) {
    if (q != place.replica) nccl.peers.push_back(q);
  }
  PT_ASSIGN_OR_RETURN(stage, ConnectNccl(nccl));
  PT_ASSIGN_OR_RETURN(
      std::unique_ptr<GroupedTransport> grouped,
      GroupedTransport::Create(place.replica, place.replicas, place.pipeline_rank,
                               place.pipeline_ranks, std::move(pipeline), std::move(stage)));
  return std::unique_ptr<Transport>(std::move(grouped));
}

absl::StatusOr<std::unique_ptr<Transport>> WorkerSession::ConnectTcp(
    const v1::PrepareRequest& request, int rank, const std::vector<std::string>& addresses,
    const std::set<int>& peers, const SessionOptions& options,
    std::unique_ptr<TcpListener> listener) {
  // Listen on this rank's address (unless the caller already does), then meet the neighbours.
  if (listener == nullptr) {
    const std::string& address = addresses[rank];
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("peers[", rank, "].address: \"", address, "\" is not host:port"));
    }
    PT_ASSIGN_OR_RETURN(listener,
                        TcpListener::Bind(ListenHostFor(address.substr(0, colon)), port));
  }
  TcpTransportOptions topts;
  topts.rank = rank;
  topts.addresses = addresses;
  topts.peers.assign(peers.begin(), peers.end());
  topts.connect_timeout = options.connect_timeout;
  // A dial left from an earlier attempt of this job (or another job) is not taken for a link.
  // With the launch's secret in it, a peer must have been given this Prepare to compute it.
  const std::string tag =
      absl::StrCat(request.job_id(), "#", request.attempt(), "#", request.transport_secret());
  topts.session_tag = XXH3_64bits(tag.data(), tag.size());
  PT_ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> transport,
                      TcpTransport::Connect(topts, std::move(listener)));
  return std::unique_ptr<Transport>(std::move(transport));
}

void WorkerSession::CrashWhileWritingCheckpoint() {
  model::CheckpointWriteOptions torn;
  torn.abandon_after_bytes = 64;
  const absl::Status s = model::SaveChunkCheckpoint(
      *model_runner_->chunk(first_stage_), next_step_,
      model::StageCheckpointPath(checkpoint_dir_, next_step_, first_stage_), torn);
  std::fprintf(stderr, "testing: killing this worker halfway through checkpoint step-%d (%s)\n",
               next_step_, s.ToString().c_str());
  std::fflush(stderr);
  raise(SIGKILL);
  _exit(137);  // not reached
}

void WorkerSession::Cancel(absl::Status status) {
  cancelled_ = true;
  transport_->Abort(std::move(status));
}

absl::StatusOr<std::vector<StageProfile>> WorkerSession::Profile(int repeats) {
  ProfileShape shape = profile_shape_;
  shape.repeats = repeats;
  return ProfileStages(*runner_, my_stages_, shape);
}

absl::Status WorkerSession::Run(int num_steps,
                                const std::function<absl::Status(const StepResult&)>& on_step) {
  absl::Status status = RunSteps(num_steps, on_step);
  // The peers' goodbyes then say why this rank stopped, instead of "finished its run".
  if (!status.ok()) transport_->Abort(status);
  return status;
}

absl::Status WorkerSession::RunSteps(
    int num_steps, const std::function<absl::Status(const StepResult&)>& on_step) {
  for (int i = 0; i < num_steps; ++i) {
    if (cancelled_) return absl::CancelledError("the run was cancelled");
    PT_ASSIGN_OR_RETURN(StepResult result, executor_->RunStep(next_step_));
    result.learning_rate = model::LearningRate(
        lr_schedule_, spec_.training().optimizer().learning_rate(), next_step_ + 1);
    ++next_step_;
    if (model_runner_ != nullptr && checkpoint_interval_ > 0 &&
        next_step_ % checkpoint_interval_ == 0) {
      // A checkpoint holds settled weights: wait for the step's verdict (executor.h).
      PT_RETURN_IF_ERROR(executor_->SettlePendingUpdate());
      if (writes_checkpoints_) {
        if (next_step_ == crash_in_checkpoint_) CrashWhileWritingCheckpoint();
        PT_RETURN_IF_ERROR(model_runner_->SaveCheckpoint(checkpoint_dir_, next_step_));
      }
      last_checkpoint_step_ = next_step_;
    }
    if (validation_executor_ != nullptr && EvaluationDue(spec_, next_step_)) {
      if (cancelled_) return absl::CancelledError("the run was cancelled");
      // The pass must see the step's final weights, not a speculative update that the verdict
      // may still roll back (clipping, non-finite gradients).
      PT_RETURN_IF_ERROR(executor_->SettlePendingUpdate());
      PT_ASSIGN_OR_RETURN(result.validation, validation_executor_->RunValidation(next_step_));
    }
    PT_RETURN_IF_ERROR(on_step(result));
  }
  // The last step's update is final once its verdict is in.
  return executor_->SettlePendingUpdate();
}

}  // namespace pipetrain::worker
