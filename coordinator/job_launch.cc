// JobManager, the way from a queued job to running workers: planning, waiting for idle workers,
// dispatch, and the re-plan with the costs the workers profiled at Prepare.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_manager_internal.h"
#include "coordinator/metrics.h"
#include "coordinator/placement.h"
#include "coordinator/transport_choice.h"
#include "glog/logging.h"
#include "model/device_peaks.h"
#include "model/job_model.h"
#include "schedule/codec/plan_proto.h"

namespace pipetrain::coordinator {
namespace {

using internal::ResumePoint;
using internal::SlimCopy;

// The profiled times of every stage of `plan`, or nullopt if some stage has none.
std::optional<planner::MeasuredStageCosts> MeasuredFromProfile(
    const v1::Plan& plan, const std::vector<v1::PrepareResponse>& responses) {
  const int stages = plan.num_stages();
  planner::MeasuredStageCosts measured;
  measured.num_stages = stages;
  measured.forward_s.assign(stages, -1);
  measured.backward_input_s.assign(stages, -1);
  measured.backward_weight_s.assign(stages, -1);
  for (const v1::PrepareResponse& response : responses) {
    for (const v1::StageTiming& t : response.profile()) {
      if (t.stage() < 0 || t.stage() >= stages) return std::nullopt;
      measured.forward_s[t.stage()] = t.forward_s();
      measured.backward_input_s[t.stage()] = t.backward_input_s();
      measured.backward_weight_s[t.stage()] = t.backward_weight_s();
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (measured.forward_s[s] < 0 || measured.backward_input_s[s] < 0 ||
        measured.backward_weight_s[s] < 0) {
      return std::nullopt;
    }
  }
  return measured;
}

// True if the plans run the same actions on the same layer split (costs and predictions aside).
bool SamePlanShape(const v1::Plan& a, const v1::Plan& b) {
  auto shape = [](const v1::Plan& p) {
    v1::Plan s;
    s.set_num_stages(p.num_stages());
    s.set_num_microbatches(p.num_microbatches());
    *s.mutable_stage_to_worker() = p.stage_to_worker();
    *s.mutable_stage_first_layer() = p.stage_first_layer();
    *s.mutable_stage_num_layers() = p.stage_num_layers();
    *s.mutable_workers() = p.workers();
    return s.SerializeAsString();
  };
  return shape(a) == shape(b);
}

}  // namespace

void JobManager::Kick() {
  absl::MutexLock lock(&kick_mu_);
  kicked_ = true;
}

void JobManager::SchedulerLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&kick_mu_);
      auto ready = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(kick_mu_) { return kicked_ || stop_scheduler_; };
      kick_mu_.AwaitWithTimeout(absl::Condition(&ready), options_.scheduler_tick);
      if (stop_scheduler_) return;
      kicked_ = false;
    }
    registry_->ExpireLost();
    while (PlanNextQueued()) {
      DispatchWaiting();
      absl::MutexLock lock(&kick_mu_);
      if (stop_scheduler_) return;
    }
    DispatchWaiting();
  }
}

bool JobManager::PlanNextQueued() {
  int64_t seq = 0;
  v1::JobSpec spec;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || queued_.empty()) return false;
    seq = queued_.front();
    queued_.pop_front();
    Record& r = jobs_[seq];
    if (r.job.state() != v1::JOB_STATE_QUEUED) return true;  // cancelled while queued
    TransitionLocked(r, v1::JOB_STATE_PLANNING, "");
    spec = r.job.spec();
  }
  absl::StatusOr<planner::PlannedJob> planned = planner_(spec, std::nullopt);
  absl::MutexLock lock(&mu_);
  Record& r = jobs_[seq];
  if (r.job.state() != v1::JOB_STATE_PLANNING) return true;  // cancelled while planning
  if (!planned.ok()) {
    TransitionLocked(r, v1::JOB_STATE_FAILED,
                     absl::StrCat("planning failed: ", planned.status().message()));
    return true;
  }
  KeepPlanLocked(r, *std::move(planned));
  if (metrics_ != nullptr) metrics_->JobPlanned(r.job.id(), r.job.plan().prediction());
  waiting_.insert(seq);
  TransitionLocked(r, v1::JOB_STATE_WAITING_FOR_WORKERS, "");
  return true;
}

void JobManager::DispatchWaiting() {
  std::vector<int64_t> launch;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      Record& r = jobs_[*it];
      const v1::JobState state = r.job.state();
      if (state != v1::JOB_STATE_WAITING_FOR_WORKERS && state != v1::JOB_STATE_RECOVERING) {
        it = waiting_.erase(it);
        continue;
      }
      // d replicas of the plan's pipeline: job rank q * p + s (docs/data_parallel.md).
      const int p = r.job.plan().workers_size() * model::DataParallelSize(r.job.spec());
      // A job runs on workers of one kind: the one it asks for, else any kind with enough.
      const v1::DeviceKind required = model::RequiredDeviceKind(r.job.spec());
      int idle = 0, live = 0;  // of the kind with the most
      for (v1::DeviceKind kind : required != v1::DEVICE_KIND_UNSPECIFIED
                                     ? std::vector<v1::DeviceKind>{required}
                                     : std::vector<v1::DeviceKind>{v1::DEVICE_KIND_CUDA,
                                                                   v1::DEVICE_KIND_CPU,
                                                                   v1::DEVICE_KIND_EMULATED}) {
        const WorkerRegistry::Counts counts = registry_->CountByState(kind);
        idle = std::max(idle, counts.idle);
        live = std::max(live, counts.idle + counts.busy);
      }
      if (idle < p) {
        // FIFO: the oldest job that the live workers can run waits for them; a job needing more
        // workers than are registered does not hold back the ones behind it, unless it is
        // recovering (its survivors are kept for it until a replacement comes).
        if (p <= live || state == v1::JOB_STATE_RECOVERING) break;
        ++it;
        continue;
      }
      absl::StatusOr<std::vector<WorkerInfo>> workers =
          registry_->Acquire(p, r.job.id(), required);
      if (!workers.ok()) break;
      // Each pipeline on as few zones and hosts as it can, neighbours next to each other.
      {
        std::vector<WorkerLocation> where;
        for (const WorkerInfo& w : *workers) {
          where.push_back({w.registration.zone, w.registration.host});
        }
        std::vector<WorkerInfo> placed;
        for (int index : PlaceRanks(where, r.job.plan().workers_size())) {
          placed.push_back((*workers)[index]);
        }
        *workers = std::move(placed);
      }
      r.targets.clear();
      r.rank_hosts.clear();
      r.job.clear_worker_ids();
      std::vector<model::WorkerPeakInput> peaks;
      for (const WorkerInfo& w : *workers) {
        const WorkerRegistration& reg = w.registration;
        peaks.push_back({reg.device, reg.device_name, reg.core_sgemm_flops_per_s, reg.cpu_cores,
                         reg.compute_threads});
        r.targets.push_back({w.id, reg.address, reg.transport_address,
                             RankDevice{reg.device, reg.host, reg.device_index}});
        r.rank_hosts.push_back(
            {reg.device == v1::DEVICE_KIND_CPU ? reg.host : "", reg.cpu_cores,
             reg.compute_threads});
        r.job.add_worker_ids(w.id);
      }
      // The MFU peak of this attempt's workers (model/device_peaks.h).
      const model::PeakFlops peak = model::JobPeakFlops(peaks, r.job.spec().compute().precision());
      std::vector<RankDevice> devices;
      for (const DispatchTarget& t : r.targets) devices.push_back(t.device);
      r.job.set_transport(ChooseTransport(devices));  // as the dispatcher will
      r.job.set_peak_flops_per_s(peak.flops_per_s);
      r.job.set_peak_flops_source(peak.source);
      r.job.set_model_flops_per_step(model::ModelFlopsPerStep(r.job.spec()));
      ApplySharedCpu(r.rank_hosts, r.schedule, r.costs, r.job.mutable_plan()->mutable_prediction(),
                     r.cpu_work);
      if (metrics_ != nullptr) metrics_->JobPlanned(r.job.id(), r.job.plan().prediction());
      r.finished.assign(p, false);
      r.aggregator.reset();
      r.ledger.reset();
      LOG(INFO) << "job " << r.job.id() << ": dispatching attempt " << r.job.recoveries_size()
                << " from step " << r.job.checkpoint_step() << " on " << p << " workers";
      TransitionLocked(r, v1::JOB_STATE_RUNNING,
                       state == v1::JOB_STATE_RECOVERING
                           ? absl::StrCat("resuming from ", ResumePoint(r.job.checkpoint_step()),
                                          " (attempt ", r.job.recoveries_size() + 1, ")")
                           : "");
      launch.push_back(*it);
      it = waiting_.erase(it);
    }
  }
  for (int64_t seq : launch) tasks_.Spawn([this, seq] { Launch(seq); });
}

void JobManager::Launch(int64_t seq) {
  v1::Job job;
  std::vector<DispatchTarget> targets;
  {
    absl::MutexLock lock(&mu_);
    Record& r = jobs_[seq];
    if (r.job.state() != v1::JOB_STATE_RUNNING) return;
    job = r.job;
    targets = r.targets;
  }
  const StepWork work{model::TokensPerStep(job.spec()), model::ModelFlopsPerStep(job.spec()),
                       job.peak_flops_per_s()};
  {
    absl::MutexLock lock(&mu_);
    Record& r = jobs_[seq];
    if (r.job.state() != v1::JOB_STATE_RUNNING) return;
    r.aggregator = std::make_unique<StepAggregator>(static_cast<int>(targets.size()), work,
                                                    r.job.checkpoint_step());
    r.ledger = std::make_unique<CheckpointLedger>(static_cast<int>(targets.size()));
  }
  auto still_running = [this, seq] {
    absl::MutexLock lock(&mu_);
    return jobs_[seq].job.state() == v1::JOB_STATE_RUNNING;
  };
  ReplanFunction replan;
  // Profile once: a resumed attempt keeps the plan its checkpoints were written with.
  if (!job.spec().parallelism().analytic_costs() && !job.plan().costs_measured()) {
    replan = [this, seq, &job](const std::vector<v1::PrepareResponse>& responses) {
      return ReplanWithProfile(seq, job, responses);
    };
  }
  const absl::Status launched = dispatcher_.Launch(job, targets, still_running, replan);
  if (launched.ok()) return;
  absl::MutexLock lock(&mu_);
  Record& r = jobs_[seq];
  if (r.job.state() != v1::JOB_STATE_RUNNING || r.job.recoveries_size() != job.recoveries_size()) {
    return;  // ended or already recovering meanwhile
  }
  if (absl::IsInvalidArgument(launched)) {  // the request itself is bad: retrying cannot help
    TransitionLocked(r, v1::JOB_STATE_FAILED, std::string(launched.message()));
  } else {
    BeginRecoveryLocked(r, std::string(launched.message()), /*counted=*/true);
  }
}

absl::StatusOr<std::optional<v1::Plan>> JobManager::ReplanWithProfile(
    int64_t seq, const v1::Job& job, const std::vector<v1::PrepareResponse>& responses) {
  std::optional<planner::MeasuredStageCosts> measured = MeasuredFromProfile(job.plan(), responses);
  if (!measured.has_value()) {
    LOG(WARNING) << "job " << job.id() << ": the workers sent no complete profile; keeping the "
                 << "analytic plan";
    return std::nullopt;
  }
  PT_ASSIGN_OR_RETURN(planner::PlannedJob planned, planner_(job.spec(), measured));
  const bool same = SamePlanShape(job.plan(), planned.plan);
  absl::MutexLock lock(&mu_);
  Record& r = jobs_[seq];
  if (r.job.state() != v1::JOB_STATE_RUNNING) {
    return absl::CancelledError("the job ended while its workers profiled");
  }
  std::optional<v1::Plan> for_workers;  // when they must prepare again
  if (!same) for_workers = planned.plan;
  KeepPlanLocked(r, std::move(planned));
  ApplySharedCpu(r.rank_hosts, r.schedule, r.costs, r.job.mutable_plan()->mutable_prediction(),
                 r.cpu_work);
  PersistLocked(r);
  if (metrics_ != nullptr) metrics_->JobPlanned(r.job.id(), r.job.plan().prediction());
  v1::JobEvent event;
  *event.mutable_job() = SlimCopy(r.job, /*with_losses=*/false);
  event.set_message(absl::StrCat("planned again with the profiled costs",
                                 same ? "" : " (the schedule changed)", ": ",
                                 r.job.plan().explanation()));
  PublishLocked(r, event);
  return for_workers;
}

void JobManager::KeepPlanLocked(Record& r, planner::PlannedJob planned) {
  *r.job.mutable_plan() = std::move(planned.plan);
  r.schedule = std::move(planned.schedule);
  r.costs = std::move(planned.costs);
  r.cpu_work = std::move(planned.cpu_work);
}

absl::Status JobManager::DecodeStoredPlan(Record& r) {
  PT_ASSIGN_OR_RETURN(r.schedule, schedule::ScheduleFromProto(r.job.plan()));
  r.costs = schedule::CostModelFromProto(r.job.plan());
  // The CPU rates are the planner's defaults (a CPU job's shared-core step is all they serve).
  absl::StatusOr<schedule::StepCpuWork> cpu_work =
      planner::StepCpuWorkOf(r.job.spec(), r.schedule.num_stages, planner::PlannerOptions{});
  r.cpu_work = cpu_work.ok() ? *std::move(cpu_work) : schedule::StepCpuWork{};
  return absl::OkStatus();
}

}  // namespace pipetrain::coordinator
