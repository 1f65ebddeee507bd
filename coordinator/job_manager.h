// JobManager: the job lifecycle. Submit validates the spec and stores the job QUEUED; a scheduler
// thread plans queued jobs in FIFO order (QUEUED -> PLANNING -> WAITING_FOR_WORKERS, or FAILED
// with the planner's message), and dispatches the oldest waiting job that enough idle workers can
// run (-> RUNNING; ranks 0..p-1 on p idle workers; see dispatcher.h). Unless the spec asks for
// analytic costs only, the workers run the profiling step at Prepare and the job is planned again
// with their measured per-stage times (the stored plan is replaced, costs_measured set, and the
// workers re-prepared if the schedule changed) before it starts. Workers report steps
// (ReportStep); when every rank finished the job is SUCCEEDED. CancelJob aborts it promptly on
// every worker (CANCELLED). Every change is written to the JobStore, and every
// state change and completed step is delivered to every watcher of the job (Watch).
//
// Checkpoints: ranks report the checkpoints they wrote (StepReport.checkpoint_step); once every
// rank reported step N the job's checkpoint_step becomes N (see checkpoint_ledger.h: manifest,
// store record, pruning).
//
// Recovery: a lost worker (missed heartbeats, re-registered, or leaving), a rank's failure
// report or a failed dispatch puts a RUNNING job in RECOVERING: the step is aborted on every
// worker of the job (workers that cannot be reached are marked lost), the event is added to
// job.recoveries and counted in metrics, steps after the checkpoint are dropped from the job's
// record, and the job waits, ahead of newer waiting jobs, for enough idle workers (restarted or
// new ones); it is then dispatched again from its checkpoint (a new attempt: reports of older
// attempts are ignored). Each recovery caused by a worker uses one of spec.max_restarts (default
// 3); past the budget the job FAILS with the reason. A bad request (InvalidArgument from a
// worker's Prepare) fails the job at once.
//
// Restart: Start() loads every stored job. RUNNING / RECOVERING jobs become RECOVERING and resume
// from their newest complete checkpoint once enough workers register (this does not use the
// restart budget); PLANNING jobs are queued again; QUEUED and WAITING_FOR_WORKERS jobs keep their
// state and order. Shutdown() leaves running jobs RECOVERING in the store (their workers are
// aborted), so they resume when the coordinator comes back.
//
// Implementation: job_manager.cc (the API, records, persistence, events), job_launch.cc (queue
// to running workers), job_recovery.cc (lost workers, rewinds, checkpoints).
//
// Events carry the Job without its plan's action lists (GetJob has them); step events carry no
// `losses` either (the terminal event and the first event of a watch do).
//
// Lock order: mu_, then the registry's lock. Store and registry calls (and the checkpoint
// manifest's small write) are made under mu_; calls to workers never are.
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_COORDINATOR_JOB_MANAGER_H_
#define PIPETRAIN_COORDINATOR_JOB_MANAGER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/checkpoint_ledger.h"
#include "coordinator/dispatcher.h"
#include "coordinator/job_store.h"
#include "coordinator/job_watch.h"
#include "coordinator/shared_cpu.h"
#include "coordinator/step_aggregator.h"
#include "coordinator/step_traces.h"
#include "coordinator/task_group.h"
#include "coordinator/worker_client.h"
#include "coordinator/worker_registry.h"
#include "pipetrain/v1/coordinator.pb.h"
#include "planner/planner.h"

namespace pipetrain::coordinator {

class CoordinatorMetrics;

// Plans a spec, with the workers' profiled costs once they exist (see planner.h).
using PlanFunction = std::function<absl::StatusOr<planner::PlannedJob>(
    const v1::JobSpec&, const std::optional<planner::MeasuredStageCosts>&)>;

struct JobManagerOptions {
  PlanFunction planner;  // empty: PlanJob with planner::PlannerOptions{} (+ the measured costs)
  DispatcherOptions dispatch;
  // How often the scheduler checks heartbeat deadlines when nothing else wakes it.
  absl::Duration scheduler_tick = absl::Milliseconds(100);
  // Step measurements are written to the store at most this often per job (state changes always).
  absl::Duration step_persist_interval = absl::Seconds(1);
  int max_unfinished_jobs = 10000;  // Submit fails with ResourceExhausted beyond this
};

struct JobPage {
  std::vector<v1::Job> jobs;
  std::string next_page_token;  // empty on the last page
};

// True for SUCCEEDED, FAILED and CANCELLED.
bool IsTerminal(v1::JobState state);

class JobManager {
 public:
  // None of the pointers is owned; all must outlive the manager. `metrics` may be null.
  JobManager(JobStore* store, WorkerRegistry* registry, WorkerClient* workers,
             CoordinatorMetrics* metrics, JobManagerOptions options);
  ~JobManager();

  // Loads the store (see Restart above) and starts the scheduler. Call once.
  absl::Status Start();
  // Stops the scheduler, aborts running jobs' workers and leaves those jobs RECOVERING (they
  // resume on the next Start), ends every watch and joins background work. Idempotent.
  void Shutdown();

  // InvalidArgument naming the field for a bad spec; Unavailable if the store failed.
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::Job> Get(const std::string& job_id) const;
  // Jobs in id order, after `page_token` (the last id of the previous page); page_size 0 = 100.
  // Listed jobs carry their plan without its action lists.
  absl::StatusOr<JobPage> List(v1::JobState state, int page_size, const std::string& page_token);
  // CANCELLED (idempotent); FailedPrecondition for a job that already SUCCEEDED or FAILED.
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  // The first event is the job as it is now; then every change until the job ends.
  absl::StatusOr<std::shared_ptr<JobWatch>> Watch(const std::string& job_id);
  // Dry run: the plan the job would get. A budget that no schedule fits is InvalidArgument.
  absl::StatusOr<v1::Plan> Plan(const v1::JobSpec& spec) const;

  // A kept step's measured timeline (step -1: the newest kept); NotFound names the kept steps.
  absl::StatusOr<v1::StepTrace> GetStepTrace(const std::string& job_id, int step);

  // From a worker; see coordinator.proto. `cancel` is set when the job no longer runs.
  // `reporter`: the worker the call was authenticated as (empty: not authenticated, no check);
  // a report for a rank another worker holds is PermissionDenied.
  absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& request,
                                                    const std::string& reporter = "");

 private:
  struct Record {
    v1::Job job;
    // What job.plan encodes, as the planner built it (the shared-core simulation re-simulates
    // these; nothing decodes the proto again). A job loaded from the store has them decoded
    // from its stored plan once, at Start.
    schedule::Schedule schedule;
    schedule::CostModel costs;
    schedule::StepCpuWork cpu_work;  // the step's CPU work of the plan (planner::StepCpuWorkOf)
    std::vector<DispatchTarget> targets;  // by rank, while assigned
    std::unique_ptr<StepAggregator> aggregator;
    std::unique_ptr<CheckpointLedger> ledger;  // of the current attempt
    std::vector<RankHost> rank_hosts;  // where each rank computes (shared_cpu.h)
    StepTraceKeeper traces;
    bool traces_loaded = false;  // the keeper holds what the store had (after a restart)
    std::vector<bool> finished;  // by rank
    std::vector<std::shared_ptr<JobWatch>> watchers;
    absl::Time last_persist;
  };

  void SchedulerLoop();
  void Kick();
  // One queued job through planning; false if there was none.
  bool PlanNextQueued();
  void DispatchWaiting();
  void Launch(int64_t seq);
  // The profiling step's answer (dispatcher.h): plans `job` again with the measured costs and
  // stores the new plan; returns it if the workers must be prepared again.
  absl::StatusOr<std::optional<v1::Plan>> ReplanWithProfile(
      int64_t seq, const v1::Job& job, const std::vector<v1::PrepareResponse>& responses);
  void OnWorkerLost(const std::string& worker_id, const std::string& job_id,
                    const std::string& reason);
  // RUNNING -> RECOVERING (see Recovery above), or FAILED past the budget. `counted`: caused by
  // a worker (uses the restart budget).
  void BeginRecoveryLocked(Record& r, const std::string& reason, bool counted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a recovery in the job and drops the steps after its checkpoint.
  void RewindLocked(Record& r, const std::string& reason, bool counted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CommitCheckpointLocked(Record& r, int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores a new plan in the job (proto) and the record (structs).
  void KeepPlanLocked(Record& r, planner::PlannedJob planned) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The structs of a stored job's plan; InvalidArgument if the stored plan does not decode.
  static absl::Status DecodeStoredPlan(Record& r);

  Record* FindLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Record*> LookupLocked(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistLocked(Record& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the state (and reason), persists, updates metrics and tells the watchers. Ending a job
  // that holds workers aborts them (unless SUCCEEDED) and then releases them.
  void TransitionLocked(Record& r, v1::JobState state, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked(Record& r, const v1::JobEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  WorkerRegistry* const registry_;
  CoordinatorMetrics* const metrics_;
  const JobManagerOptions options_;
  PlanFunction planner_;
  const Dispatcher dispatcher_;
  TaskGroup tasks_;

  mutable absl::Mutex mu_;
  std::map<int64_t, Record> jobs_ ABSL_GUARDED_BY(mu_);  // by sequence number
  std::deque<int64_t> queued_ ABSL_GUARDED_BY(mu_);      // FIFO of QUEUED jobs
  std::set<int64_t> waiting_ ABSL_GUARDED_BY(mu_);       // WAITING_FOR_WORKERS, oldest first
  int unfinished_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex kick_mu_;
  bool kicked_ ABSL_GUARDED_BY(kick_mu_) = false;
  bool stop_scheduler_ ABSL_GUARDED_BY(kick_mu_) = false;
  std::thread scheduler_;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_JOB_MANAGER_H_
