// JobClient against an in-process JobService: responses past gRPC's default 4 MiB (the record or
// step trace of a big job: p = 64, m = 1024 is ~330k actions with a timing each) arrive whole.
#include "client/job_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "pipetrain/v1/coordinator.grpc.pb.h"

namespace pipetrain::client {
namespace {

// Answers GetJob and GetStepTrace with messages of about `bytes`.
class BigAnswers : public v1::JobService::Service {
 public:
  explicit BigAnswers(int bytes) : bytes_(bytes) {}
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* job) override {
    job->set_id(request->job_id());
    for (int i = 0; i < bytes_ / 9; ++i) job->add_losses(1.0 + i);  // 9 bytes per packed double
    return grpc::Status::OK;
  }
  grpc::Status GetStepTrace(grpc::ServerContext*, const v1::GetStepTraceRequest* request,
                            v1::StepTrace* trace) override {
    trace->set_step(request->step());
    v1::StepReport* rank = trace->add_ranks();
    for (int i = 0; i < bytes_ / 20; ++i) {
      v1::ActionTiming* t = rank->add_timings();
      t->set_start_ns(1000000000LL + i);
      t->set_end_ns(2000000000LL + i);
    }
    return grpc::Status::OK;
  }

 private:
  const int bytes_;
};

TEST(JobClientTest, ReceivesResponsesPastFourMebibytes) {
  constexpr int kBytes = 12 << 20;
  BigAnswers service(kBytes);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  JobClient client("127.0.0.1:" + std::to_string(port), "");
  absl::StatusOr<v1::Job> job = client.Get("job-000001");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_GT(job->ByteSizeLong(), 4u << 20);
  EXPECT_EQ(job->losses_size(), kBytes / 9);
  absl::StatusOr<v1::StepTrace> trace = client.GetStepTrace("job-000001", 3);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_GT(trace->ByteSizeLong(), 4u << 20);
  EXPECT_EQ(trace->ranks(0).timings_size(), kBytes / 20);
  server->Shutdown();
}

}  // namespace
}  // namespace pipetrain::client
