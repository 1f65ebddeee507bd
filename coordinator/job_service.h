// JobServiceImpl: the thin gRPC adapter of pipetrain.v1.JobService over JobManager. It checks the
// optional bearer token, turns absl::Status into grpc::Status (the one place where that happens
// for this service; non-OK answers are counted per method) and streams WatchJob events.
//
// Thread-safety: thread-safe (gRPC calls it from many threads).
#ifndef PIPETRAIN_COORDINATOR_JOB_SERVICE_H_
#define PIPETRAIN_COORDINATOR_JOB_SERVICE_H_

#include <atomic>
#include <string>

#include "coordinator/job_manager.h"
#include "coordinator/metrics.h"
#include "coordinator/worker_registry.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"

namespace pipetrain::coordinator {

class JobServiceImpl final : public v1::JobService::Service {
 public:
  // `auth_token` empty: no authentication. `metrics` may be null.
  JobServiceImpl(JobManager* jobs, const WorkerRegistry* registry, CoordinatorMetrics* metrics,
                 std::string auth_token)
      : jobs_(jobs), registry_(registry), metrics_(metrics), auth_token_(std::move(auth_token)) {}

  // Ends every WatchJob stream soon (server shutdown).
  void StopStreams() { stopping_ = true; }

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status PlanJob(grpc::ServerContext* context, const v1::PlanJobRequest* request,
                       v1::PlanJobResponse* response) override;
  grpc::Status GetStepTrace(grpc::ServerContext* context, const v1::GetStepTraceRequest* request,
                            v1::StepTrace* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;

 private:
  absl::Status Authorize(const grpc::ServerContext& context) const;
  grpc::Status Finish(const char* method, const absl::Status& status) const;

  JobManager* const jobs_;
  const WorkerRegistry* const registry_;
  CoordinatorMetrics* const metrics_;
  const std::string auth_token_;
  std::atomic<bool> stopping_{false};
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_JOB_SERVICE_H_
