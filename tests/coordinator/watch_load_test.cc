// Load: 200 queued jobs and 50 concurrent WatchJob streams on one in-process coordinator (gRPC on
// 127.0.0.1:0, fake store and workers). Every job is listed; every watcher sees every state
// change after its first event, in order, and every step, exactly once; nothing is lost.
#include <grpcpp/grpcpp.h>

#include <thread>

#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"
#include "tests/coordinator/grpc_test_util.h"
#include "tests/coordinator/in_process_coordinator.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"

namespace pipetrain::coordinator {
namespace {

constexpr int kJobs = 200;
constexpr int kWatchers = 50;
constexpr int kSteps = 2;

TEST(WatchLoadTest, FiftyWatchersTwoHundredJobs) {
  testing::FakeJobStore store;
  testing::FakeWorkerClient workers;
  std::unique_ptr<Coordinator> coordinator = testing::StartWithFakeSteps(
      testing::InProcessConfig(&store, &workers), &workers, absl::ZeroDuration());
  auto channel = testing::Loopback(coordinator->address());
  auto jobs = v1::JobService::NewStub(channel);

  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = testing::SmallSpec(2, kSteps);
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(jobs->SubmitJob(&context, request, &response).ok());
    ids.push_back(response.job().id());
  }
  // All listed, across pages.
  std::vector<std::string> listed;
  std::string token;
  do {
    v1::ListJobsRequest request;
    request.set_page_size(64);
    request.set_page_token(token);
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(jobs->ListJobs(&context, request, &response).ok());
    for (const v1::Job& j : response.jobs()) listed.push_back(j.id());
    token = response.next_page_token();
  } while (!token.empty());
  EXPECT_EQ(listed, ids);

  // 50 watchers on jobs spread over the queue (two per job on the first ones).
  struct Seen {
    std::vector<v1::JobState> states;
    std::vector<int> steps;
    grpc::Status status;
  };
  std::vector<Seen> seen(kWatchers);
  std::vector<std::thread> threads;
  std::atomic<int> subscribed{0};
  for (int w = 0; w < kWatchers; ++w) {
    const std::string id = ids[(w * 7) % kJobs];
    threads.emplace_back([&, w, id] {
      v1::WatchJobRequest request;
      request.set_job_id(id);
      grpc::ClientContext context;
      auto reader = jobs->WatchJob(&context, request);
      v1::JobEvent event;
      bool first = true;
      while (reader->Read(&event)) {
        if (first) ++subscribed;
        first = false;
        if (event.has_step()) {
          seen[w].steps.push_back(event.step().step());
        } else {
          seen[w].states.push_back(event.job().state());
        }
      }
      seen[w].status = reader->Finish();
    });
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return subscribed == kWatchers; }, absl::Seconds(30)));
  for (int i = 0; i < 4; ++i) testing::AddWorker(coordinator->registry(), i);
  for (std::thread& t : threads) t.join();

  const std::vector<v1::JobState> path = {v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLANNING,
                                          v1::JOB_STATE_WAITING_FOR_WORKERS, v1::JOB_STATE_RUNNING,
                                          v1::JOB_STATE_SUCCEEDED};
  for (int w = 0; w < kWatchers; ++w) {
    ASSERT_TRUE(seen[w].status.ok()) << seen[w].status.error_message();
    ASSERT_FALSE(seen[w].states.empty());
    // From the state of the first event, every later state exactly once, in order.
    auto start = std::find(path.begin(), path.end(), seen[w].states.front());
    ASSERT_NE(start, path.end());
    EXPECT_EQ(seen[w].states, std::vector<v1::JobState>(start, path.end())) << "watcher " << w;
    EXPECT_EQ(seen[w].steps, (std::vector<int>{0, 1})) << "watcher " << w;
  }
  // Watched or not, every job runs to the end.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return coordinator->jobs().List(v1::JOB_STATE_SUCCEEDED, 1000, "").value().jobs.size() ==
               kJobs;
      },
      absl::Seconds(60)));
  for (const std::string& id : ids) {
    EXPECT_EQ(coordinator->jobs().Get(id).value().state(), v1::JOB_STATE_SUCCEEDED) << id;
  }
  workers.Shutdown();
  coordinator->Shutdown();
}

}  // namespace
}  // namespace pipetrain::coordinator
