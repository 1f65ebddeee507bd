#include "coordinator/dispatcher.h"

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/nccl_groups.h"
#include "common/secret.h"
#include "glog/logging.h"
#include "model/job_model.h"

namespace pipetrain::coordinator {
namespace {

// Runs fn(r) for r in [0, n) on n threads and returns the per-rank statuses.
std::vector<absl::Status> ForEachRank(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { statuses[r] = fn(r); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

absl::Status FirstError(const std::vector<absl::Status>& statuses,
                        const std::vector<DispatchTarget>& targets, absl::string_view phase) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) {
      return absl::Status(
          statuses[r].code(),
          absl::StrCat(phase, " failed on rank ", r, " (worker ", targets[r].worker_id, " at ",
                       targets[r].address, "): ", statuses[r].message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<v1::PrepareRequest>> Dispatcher::BuildPrepareRequests(
    const v1::Job& job, const std::vector<DispatchTarget>& targets) const {
  std::vector<RankDevice> devices;
  for (const DispatchTarget& t : targets) devices.push_back(t.device);
  const int replicas = model::DataParallelSize(job.spec());
  const int p = std::max(1, job.plan().workers_size());
  const v1::TransportKind transport = ChooseTransport(devices);
  // NCCL: one id per communicator group, from the worker of the group's first member.
  std::vector<std::string> pipeline_ids(replicas), stage_ids(p);
  if (transport == v1::TRANSPORT_KIND_NCCL) {
    absl::StatusOr<std::vector<NcclGroup>> groups = NcclGroupsOf(p, replicas);
    if (!groups.ok()) return groups.status();
    for (const NcclGroup& group : *groups) {
      const int creator = group.creator();
      if (creator >= static_cast<int>(targets.size())) {
        return absl::InvalidArgumentError(absl::StrCat("the job has ", replicas * p, " ranks, but ",
                                                       targets.size(), " workers were assigned"));
      }
      absl::StatusOr<std::string> id =
          client_->CreateNcclId(targets[creator].address, job.id(), options_.prepare_timeout);
      if (!id.ok()) {
        return absl::Status(
            id.status().code(),
            absl::StrCat("CreateNcclId failed on rank ", creator, " (worker ",
                         targets[creator].worker_id, " at ", targets[creator].address, ", for ",
                         group.kind == NcclGroupKind::kPipeline
                             ? "the pipeline group of replica "
                             : "the stage group of pipeline rank ",
                         group.index, "): ", id.status().message()));
      }
      (group.kind == NcclGroupKind::kPipeline ? pipeline_ids : stage_ids)[group.index] =
          *std::move(id);
    }
  }
  // Only this launch's ranks know it: the transport's hello carries a tag derived from it.
  const std::string transport_secret = RandomToken();
  std::vector<v1::PrepareRequest> requests(targets.size());
  for (size_t r = 0; r < targets.size(); ++r) {
    v1::PrepareRequest& request = requests[r];
    request.set_job_id(job.id());
    // Data parallelism: target r is replica r / p's pipeline rank r % p (replica_reducer.h).
    const int q = static_cast<int>(r) / p, w = static_cast<int>(r) % p;
    request.set_rank(w);
    request.set_replica(q);
    *request.mutable_spec() = job.spec();
    *request.mutable_plan() = job.plan();
    for (size_t peer = 0; peer < targets.size(); ++peer) {
      v1::Peer* entry = request.add_peers();
      entry->set_rank(static_cast<int>(peer));
      entry->set_address(targets[peer].transport_address.empty() ? targets[peer].address
                                                                 : targets[peer].transport_address);
    }
    request.set_start_step(job.checkpoint_step());
    if (job.checkpoint_step() > 0) request.set_checkpoint_path(job.spec().checkpoint().dir());
    request.set_attempt(job.recoveries_size());
    request.set_transport(transport);
    if (q < replicas && !pipeline_ids[q].empty()) request.set_nccl_unique_id(pipeline_ids[q]);
    if (!stage_ids[w].empty()) request.set_nccl_stage_unique_id(stage_ids[w]);
    request.set_transport_secret(transport_secret);
  }
  return requests;
}

absl::StatusOr<std::vector<v1::PrepareResponse>> Dispatcher::PrepareAll(
    const std::vector<v1::PrepareRequest>& requests,
    const std::vector<DispatchTarget>& targets) const {
  std::vector<v1::PrepareResponse> responses(targets.size());
  std::vector<absl::Status> prepared =
      ForEachRank(static_cast<int>(targets.size()), [&](int r) -> absl::Status {
        absl::StatusOr<v1::PrepareResponse> response =
            client_->Prepare(targets[r].address, requests[r], options_.prepare_timeout);
        if (!response.ok()) return response.status();
        responses[r] = *std::move(response);
        return absl::OkStatus();
      });
  if (absl::Status s = FirstError(prepared, targets, "Prepare"); !s.ok()) return s;
  return responses;
}

absl::Status Dispatcher::Launch(const v1::Job& job, const std::vector<DispatchTarget>& targets,
                                const std::function<bool()>& still_wanted,
                                const ReplanFunction& replan) const {
  absl::StatusOr<std::vector<v1::PrepareRequest>> requests = BuildPrepareRequests(job, targets);
  if (!requests.ok()) return requests.status();
  for (v1::PrepareRequest& request : *requests) request.set_profile(replan != nullptr);
  if (job.recoveries_size() > 0) {
    // Best effort: a worker that cannot be reached fails its Prepare below anyway.
    AbortAll(job.id(), targets, "resuming the job from its last checkpoint");
  }
  absl::StatusOr<std::vector<v1::PrepareResponse>> responses = PrepareAll(*requests, targets);
  if (!responses.ok()) return responses.status();
  if (still_wanted && !still_wanted()) {
    return absl::CancelledError("the job ended while its workers prepared");
  }
  if (replan != nullptr) {
    absl::StatusOr<std::optional<v1::Plan>> plan = replan(*responses);
    if (!plan.ok()) {
      return absl::Status(plan.status().code(),
                          absl::StrCat("planning with the profiled costs failed: ",
                                       plan.status().message()));
    }
    if (plan->has_value()) {
      AbortAll(job.id(), targets, "re-planned with the profiled costs");
      v1::Job replanned = job;
      *replanned.mutable_plan() = **std::move(plan);
      requests = BuildPrepareRequests(replanned, targets);
      if (!requests.ok()) return requests.status();
      responses = PrepareAll(*requests, targets);
      if (!responses.ok()) return responses.status();
      if (still_wanted && !still_wanted()) {
        return absl::CancelledError("the job ended while its workers prepared");
      }
    }
  }
  v1::StartRequest start;
  start.set_job_id(job.id());
  start.set_num_steps(job.spec().training().steps() - job.checkpoint_step());
  std::vector<absl::Status> started =
      ForEachRank(static_cast<int>(targets.size()), [&](int r) -> absl::Status {
        return client_->Start(targets[r].address, start, options_.start_timeout);
      });
  return FirstError(started, targets, "Start");
}

std::vector<absl::Status> Dispatcher::AbortAll(const std::string& job_id,
                                               const std::vector<DispatchTarget>& targets,
                                               const std::string& reason) const {
  v1::AbortRequest abort;
  abort.set_job_id(job_id);
  abort.set_reason(reason);
  std::vector<absl::Status> aborted =
      ForEachRank(static_cast<int>(targets.size()), [&](int r) -> absl::Status {
        return client_->Abort(targets[r].address, abort, options_.abort_timeout);
      });
  for (size_t r = 0; r < aborted.size(); ++r) {
    if (!aborted[r].ok()) {
      LOG(WARNING) << "Abort of " << job_id << " on rank " << r << " (" << targets[r].address
                   << "): " << aborted[r];
    }
  }
  return aborted;
}

}  // namespace pipetrain::coordinator
