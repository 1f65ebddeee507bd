// JobManagerTest: a JobManager over the fake store and fake workers, shared by the launch
// (job_manager_test.cc) and recovery (job_recovery_test.cc) tests.
#ifndef PIPETRAIN_TESTS_COORDINATOR_JOB_MANAGER_FIXTURE_H_
#define PIPETRAIN_TESTS_COORDINATOR_JOB_MANAGER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "coordinator/job_manager.h"
#include "coordinator/metrics.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"

namespace pipetrain::coordinator {

class JobManagerTest : public ::testing::Test {
 protected:
  void Make(JobManagerOptions options = {}, absl::Duration heartbeat = absl::Seconds(30)) {
    registry_ = std::make_unique<WorkerRegistry>(WorkerRegistryOptions{heartbeat}, &metrics_);
    options.scheduler_tick = absl::Milliseconds(20);
    options.dispatch.prepare_timeout = absl::Seconds(5);
    manager_ = std::make_unique<JobManager>(&store_, registry_.get(), &workers_, &metrics_,
                                            std::move(options));
    workers_.SetAutoRun([this](const v1::ReportStepRequest& r) { return manager_->ReportStep(r); },
                        step_delay_);
  }
  // Make() with the defaults (and `heartbeat`), Start() and register fake workers 0 and 1;
  // false if Start fails.
  bool StartWithTwoWorkers(absl::Duration heartbeat = absl::Seconds(30)) {
    Make({}, heartbeat);
    if (!manager_->Start().ok()) return false;
    worker_ids_ = {::pipetrain::testing::AddWorker(*registry_, 0),
                   ::pipetrain::testing::AddWorker(*registry_, 1)};
    return true;
  }
  // StartWithTwoWorkers(), with both fake workers stalling at `stall_at_step` until their
  // behaviour is reset (the job stays RUNNING there). Returns the two workers' ids.
  struct TwoWorkers {
    std::string w0, w1;
  };
  TwoWorkers StartWithTwoStalledWorkers(int stall_at_step,
                                        absl::Duration heartbeat = absl::Seconds(30)) {
    ::pipetrain::testing::FakeWorkerClient::Behavior stall;
    stall.stall_at_step = stall_at_step;
    workers_.SetBehavior("127.0.0.1:20000", stall);
    workers_.SetBehavior("127.0.0.1:20001", stall);
    if (!StartWithTwoWorkers(heartbeat)) {
      ADD_FAILURE() << "JobManager::Start failed";
      return {};
    }
    return {worker_ids_[0], worker_ids_[1]};
  }
  void TearDown() override {
    workers_.Shutdown();
    if (manager_ != nullptr) manager_->Shutdown();
  }
  v1::JobState State(const std::string& id) { return manager_->Get(id).value().state(); }
  bool WaitState(const std::string& id, v1::JobState state,
                 absl::Duration timeout = absl::Seconds(10)) {
    return ::pipetrain::testing::WaitUntil([&] { return State(id) == state; }, timeout);
  }

  absl::Duration step_delay_ = absl::ZeroDuration();
  std::vector<std::string> worker_ids_;  // by StartWithTwoWorkers
  ::pipetrain::testing::FakeJobStore store_;
  ::pipetrain::testing::FakeWorkerClient workers_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> manager_;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_TESTS_COORDINATOR_JOB_MANAGER_FIXTURE_H_
