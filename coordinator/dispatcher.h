// Dispatcher: launches a planned job on its assigned workers and aborts it. Rank r runs on
// targets[r]. Launch builds one PrepareRequest per rank (job id, rank, spec, the whole plan,
// every rank's peer address = that worker's transport address, the resume point: start step =
// job.checkpoint_step, loading <checkpoint.dir>/step-N when N > 0, and the attempt number =
// job.recoveries_size, which the worker echoes in its step reports), calls Prepare on ALL ranks
// concurrently (each worker's Prepare blocks until it has connected to its pipeline
// neighbours, so sequential calls would deadlock), then Start on all ranks (also concurrently)
// for the remaining steps. A resumed launch first aborts the job on every target, since a
// worker may still run an earlier attempt of it (after a coordinator restart).
//
// Profiling step: with a `replan` callback the Prepare requests ask every rank to time its
// stages (PrepareRequest.profile); `replan` gets the responses and returns the plan to run. When
// it returns a different plan, the profiled preparation is aborted on every rank and the ranks
// are prepared again with the new plan (no profile this time) before Start.
//
// Thread-safety: thread-safe; stateless apart from the client and options.
#ifndef PIPETRAIN_COORDINATOR_DISPATCHER_H_
#define PIPETRAIN_COORDINATOR_DISPATCHER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/transport_choice.h"
#include "coordinator/worker_client.h"
#include "pipetrain/v1/job.pb.h"
#include "pipetrain/v1/worker.pb.h"

namespace pipetrain::coordinator {

struct DispatchTarget {
  std::string worker_id;
  std::string address;            // Worker service
  std::string transport_address;  // where peers connect
  RankDevice device;              // where it computes (decides the transport)
};

// Given every rank's PrepareResponse (with its profile), the plan to run instead of the prepared
// one, or nullopt to run the prepared plan.
using ReplanFunction = std::function<absl::StatusOr<std::optional<v1::Plan>>(
    const std::vector<v1::PrepareResponse>&)>;

struct DispatcherOptions {
  absl::Duration prepare_timeout = absl::Seconds(120);
  absl::Duration start_timeout = absl::Seconds(30);
  absl::Duration abort_timeout = absl::Seconds(5);
};

class Dispatcher {
 public:
  Dispatcher(WorkerClient* client, const DispatcherOptions& options)
      : client_(client), options_(options) {}
  // WorkerClient::CancelLaunchCalls: every Launch in flight fails soon after (shutdown).
  void CancelLaunches() const { client_->CancelLaunchCalls(); }

  // The PrepareRequest of every rank, in rank order, with the transport ChooseTransport picks
  // for the targets' devices. For NCCL, the first member of every communicator group
  // (common/nccl_groups.h: each replica's pipeline group, with d > 1 each stage group) is asked
  // for that group's id (fresh ones per call: every Prepare round joins new communicators).
  absl::StatusOr<std::vector<v1::PrepareRequest>> BuildPrepareRequests(
      const v1::Job& job, const std::vector<DispatchTarget>& targets) const;

  // Prepare on every rank concurrently, then Start on every rank. The first failure (naming the
  // rank, worker and phase) is returned; the caller aborts the job. `still_wanted` (if set) is
  // asked between the phases: false stops before Start with Cancelled.
  absl::Status Launch(const v1::Job& job, const std::vector<DispatchTarget>& targets,
                      const std::function<bool()>& still_wanted = nullptr,
                      const ReplanFunction& replan = nullptr) const;

  // Abort on every rank concurrently, best effort; returns when all answered or timed out, with
  // each rank's status (a failure means the worker is unreachable or broken).
  std::vector<absl::Status> AbortAll(const std::string& job_id,
                                     const std::vector<DispatchTarget>& targets,
                                     const std::string& reason) const;

 private:
  // Prepare on every rank concurrently; the responses by rank, or the first failure.
  absl::StatusOr<std::vector<v1::PrepareResponse>> PrepareAll(
      const std::vector<v1::PrepareRequest>& requests,
      const std::vector<DispatchTarget>& targets) const;

  WorkerClient* const client_;
  const DispatcherOptions options_;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_DISPATCHER_H_
