// GrpcServerMetrics (common/grpc_server_metrics.h) on a real in-process gRPC server: every RPC
// is counted under its service and method when it starts and under its status code when it is
// answered, and timed (a ManualClock makes each RPC take exactly 3 ms).
#include "common/grpc_server_metrics.h"

#include <grpcpp/grpcpp.h>
#include <prometheus/text_serializer.h>

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"
#include "tests/fakes/manual_clock.h"

namespace pipetrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Heartbeat answers OK, ReportStep NOT_FOUND; RegisterWorker is left unimplemented.
class Registry : public v1::WorkerRegistry::Service {
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status ReportStep(grpc::ServerContext*, const v1::ReportStepRequest*,
                          v1::ReportStepResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job");
  }
};

TEST(GrpcServerMetricsTest, CountsAndTimesEveryRpcByMethodAndCode) {
  prometheus::Registry registry;
  // Each NowNs() read moves the clock 3 ms: an RPC's start and end reads are 3 ms apart.
  ManualClock clock(0, 3'000'000);
  GrpcServerMetrics metrics(registry, &clock);
  Registry service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(metrics.MakeInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(creators));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  auto stub = v1::WorkerRegistry::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::HeartbeatResponse response;
    EXPECT_TRUE(stub->Heartbeat(&context, v1::HeartbeatRequest(), &response).ok());
  }
  {
    grpc::ClientContext context;
    v1::ReportStepResponse response;
    EXPECT_EQ(stub->ReportStep(&context, v1::ReportStepRequest(), &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    v1::RegisterWorkerResponse response;
    EXPECT_EQ(stub->RegisterWorker(&context, v1::RegisterWorkerRequest(), &response).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  server->Shutdown();
  server->Wait();

  const std::string body = prometheus::TextSerializer().Serialize(registry.Collect());
  const std::string heartbeat = "grpc_method=\"Heartbeat\",grpc_service=\"pipetrain.v1.WorkerRegistry\"";
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_started_total{" + heartbeat + "} 3"));
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handled_total{grpc_code=\"OK\"," + heartbeat +
                              "} 3"));
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handled_total{grpc_code=\"NOT_FOUND\","
                              "grpc_method=\"ReportStep\",grpc_service=\"pipetrain.v1."
                              "WorkerRegistry\"} 1"));
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handled_total{grpc_code=\"UNIMPLEMENTED\","
                              "grpc_method=\"RegisterWorker\",grpc_service=\"pipetrain.v1."
                              "WorkerRegistry\"} 1"));
  EXPECT_THAT(body, Not(HasSubstr("grpc_code=\"OK\",grpc_method=\"ReportStep\"")));
  // 3 ms each: in the 5 ms bucket, not the 2.5 ms one.
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handling_seconds_count{" + heartbeat +
                              "} 3"));
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handling_seconds_sum{" + heartbeat +
                              "} 0.009"));
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handling_seconds_bucket{" + heartbeat +
                              ",le=\"0.0025\"} 0"));
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handling_seconds_bucket{" + heartbeat +
                              ",le=\"0.005\"} 3"));
}

TEST(GrpcServerMetricsTest, MethodLabelsAreBounded) {
  prometheus::Registry registry;
  GrpcServerMetrics metrics(registry);
  for (int i = 0; i < GrpcServerMetrics::kMaxMethods + 10; ++i) {
    const auto labels = metrics.Started(("/svc.S/M" + std::to_string(i)).c_str());
    metrics.Handled(labels, grpc::StatusCode::OK, 0.001);
  }
  EXPECT_EQ(metrics.Started("/svc.S/M0"), std::make_pair(std::string("svc.S"), std::string("M0")));
  EXPECT_EQ(metrics.Started("/svc.S/Mnew"),
            std::make_pair(std::string("other"), std::string("other")));
  EXPECT_EQ(metrics.Started(nullptr), std::make_pair(std::string("other"), std::string("other")));
  const std::string body = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_THAT(body, HasSubstr("pipetrain_grpc_server_handled_total{grpc_code=\"OK\","
                              "grpc_method=\"other\",grpc_service=\"other\"} 10"));
}

}  // namespace
}  // namespace pipetrain
