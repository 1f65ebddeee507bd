// Fault tolerance with real processes: a pipetrain-coordinator (SQLite store) and four
// pipetrain-worker daemons on loopback train a small GPT with checkpoints every 2 steps. Each
// test first runs the job uninterrupted (the oracle: its losses equal the single-process
// reference trainer's bitwise, and its final checkpoint holds the final weights and optimizer
// state), then runs it again through a fault, and requires the same loss curve bitwise and
// byte-identical final checkpoint files:
//   - kill -9 of one of the 4 workers mid-training, a replacement started (default coordinator
//     settings; the detection time from the kill to RECOVERING is printed);
//   - a worker killed halfway through writing a checkpoint: the torn checkpoint is never used;
//   - a stopped (SIGSTOP) worker, found only by the heartbeat deadline (default settings;
//     detection time printed);
//   - kill -9 of the coordinator, restarted on the same database;
//   - SIGTERM of a worker and of the coordinator (graceful: exit 0, the job resumes);
//   - a network partition of one worker (its own network namespace, link down then up; skipped
//     without root / iproute2);
// and Cancel stops a running job on every worker promptly; one-step jobs submitted back to back
// drain without a worker refusing one as busy; a data-parallel job (2 replicas x 2 ranks) whose
// replica-1 worker is killed resumes bitwise. Every wait is bounded.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/job_client.h"
#include "model/checkpoint_layout.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/network_namespace.h"
#include "tests/e2e/process_util.h"
#include "tests/e2e/wait_job.h"

namespace pipetrain {
namespace {

constexpr int kWorkers = 4;
constexpr int kSteps = 24;
constexpr int kInterval = 2;

// A coordinator and its workers as child processes; all are killed when it goes.
class Cluster {
 public:
  // Every daemon listens on `host` (a worker in a namespace: on the namespace's address).
  explicit Cluster(std::string host)
      : dir_(testing::TempDir()), host_(std::move(host)), port_(testing::FreePort()) {}
  ~Cluster() {
    for (testing::Process& p : processes_) {
      if (!exited_[p.pid]) {
        testing::Kill(p, SIGCONT);
        testing::Kill(p, SIGKILL);
        testing::WaitFor(p, absl::Seconds(5));
      }
    }
  }

  const std::string& dir() const { return dir_; }
  std::string address() const { return absl::StrCat(host_, ":", port_); }

  // Starts the coordinator (again: same port, same database).
  testing::Process StartCoordinator() {
    testing::Process p =
        Track(testing::Spawn({PIPETRAIN_COORDINATOR_BIN, "--listen", address(), "--metrics-listen",
                              "", "--db", dir_ + "/pipetrain.db"},
                             absl::StrCat(dir_, "/coordinator.", ++coordinators_)));
    EXPECT_TRUE(testing::WaitForText(p.stdout_path, "listening on", absl::Seconds(20)))
        << testing::ReadFile(p.stderr_path);
    return p;
  }

  // `ns`: start it inside that network namespace.
  testing::Process StartWorker(const std::string& name, std::vector<std::string> extra = {},
                               const testing::NetworkNamespace* ns = nullptr) {
    const std::string ip = ns != nullptr ? ns->inside_ip() : host_;
    std::vector<std::string> argv = {PIPETRAIN_WORKER_BIN,
                                     "--coordinator",
                                     address(),
                                     "--name",
                                     name,
                                     "--metrics-listen",
                                     "",
                                     "--connect-timeout",
                                     "10",
                                     "--recv-timeout",
                                     "20",
                                     "--listen",
                                     ip + ":0",
                                     "--transport-listen",
                                     ip + ":0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (ns != nullptr) argv = ns->Exec(argv);
    testing::Process p = Track(testing::Spawn(argv, absl::StrCat(dir_, "/", name)));
    EXPECT_TRUE(testing::WaitForText(p.stdout_path, "listening on", absl::Seconds(20)))
        << testing::ReadFile(p.stderr_path);
    return p;
  }

  // Exit code within `timeout` (nullopt: still running, now killed).
  std::optional<int> Wait(const testing::Process& p, absl::Duration timeout) {
    std::optional<int> code = testing::WaitFor(p, timeout);
    exited_[p.pid] = true;
    return code;
  }

  std::string Logs() const {
    std::string all;
    for (const testing::Process& p : processes_) {
      absl::StrAppend(&all, "---- ", p.stderr_path, "\n", testing::ReadFile(p.stderr_path));
    }
    return all;
  }

 private:
  testing::Process Track(testing::Process p) {
    processes_.push_back(p);
    exited_[p.pid] = false;
    return p;
  }

  const std::string dir_;
  const std::string host_;
  const int port_;
  int coordinators_ = 0;
  std::vector<testing::Process> processes_;
  std::map<pid_t, bool> exited_;
};

using testing::WaitJob;

bool Ended(const v1::Job& job) {
  return job.state() == v1::JOB_STATE_SUCCEEDED || job.state() == v1::JOB_STATE_FAILED ||
         job.state() == v1::JOB_STATE_CANCELLED;
}

v1::JobSpec Spec(const std::string& checkpoint_dir) {
  v1::JobSpec spec = testing::SmallJob("1f1b", kWorkers, 4, kSteps);
  spec.mutable_checkpoint()->set_dir(checkpoint_dir);
  spec.mutable_checkpoint()->set_interval_steps(kInterval);
  spec.mutable_checkpoint()->set_keep_last(2);
  return spec;
}

// The final checkpoint's stage files (weights and optimizer state), by stage.
std::vector<std::string> FinalCheckpoint(const std::string& dir, int num_stages) {
  std::vector<std::string> files;
  for (int s = 0; s < num_stages; ++s) {
    files.push_back(testing::ReadFile(model::StageCheckpointPath(dir, kSteps, s)));
  }
  return files;
}

class FaultToleranceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(ClusterHost());
    coordinator_ = cluster_->StartCoordinator();
    for (int i = 0; i < kWorkers; ++i) {
      workers_.push_back(
          cluster_->StartWorker(absl::StrCat("w", i), WorkerFlags(i), WorkerNamespace(i)));
    }
    jobs_ = std::make_unique<client::JobClient>(cluster_->address(), "", client::ClientTls{},
                                                absl::Seconds(5));
    RunReference();
  }
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "%s\n", cluster_->Logs().c_str());
  }
  // Extra flags of worker i (the fault tests' hooks).
  virtual std::vector<std::string> WorkerFlags(int) { return {}; }
  // Where the daemons listen, and the network namespace worker i runs in (none: this one).
  virtual std::string ClusterHost() { return "127.0.0.1"; }
  virtual const testing::NetworkNamespace* WorkerNamespace(int) { return nullptr; }

  // The uninterrupted run: the oracle for the faulty one.
  void RunReference() {
    const v1::JobSpec spec = Spec(cluster_->dir() + "/reference-ckpt");
    auto submitted = jobs_->Submit(spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    auto done = WaitJob(*jobs_, submitted->id(), Ended, absl::Seconds(60));
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();
    ASSERT_TRUE(done->recoveries().empty());
    reference_losses_.assign(done->losses().begin(), done->losses().end());
    const std::vector<double> single_process = testing::ReferenceLosses(spec);
    ASSERT_EQ(reference_losses_, single_process);
    num_stages_ = done->plan().stage_to_worker_size();
    reference_weights_ = FinalCheckpoint(spec.checkpoint().dir(), num_stages_);
    for (const std::string& f : reference_weights_) ASSERT_GT(f.size(), 1000u);
  }

  // Submits the faulty run's job; returns its id once checkpoint step >= `checkpointed` exists.
  std::string SubmitAndWaitForCheckpoint(int checkpointed) {
    auto submitted = jobs_->Submit(Spec(ckpt_dir()));
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return "";
    auto running = WaitJob(
        *jobs_, submitted->id(),
        [&](const v1::Job& j) { return j.checkpoint_step() >= checkpointed || Ended(j); },
        absl::Seconds(60));
    EXPECT_TRUE(running.ok()) << running.status();
    EXPECT_EQ(running->state(), v1::JOB_STATE_RUNNING) << "ended before the fault";
    return submitted->id();
  }

  // Milliseconds from `since` until the job is RECOVERING (or a later state of the recovery).
  double MillisUntilRecovering(const std::string& id, absl::Time since) {
    auto recovering = WaitJob(
        *jobs_, id,
        [](const v1::Job& j) { return j.state() != v1::JOB_STATE_RUNNING || j.restarts() > 0; },
        absl::Seconds(30));
    const absl::Time seen = absl::Now();
    EXPECT_TRUE(recovering.ok()) << recovering.status();
    EXPECT_EQ(recovering->state(), v1::JOB_STATE_RECOVERING) << recovering->failure_reason();
    return absl::ToDoubleMilliseconds(seen - since);
  }

  // The faulty run completed exactly like the uninterrupted one.
  v1::Job ExpectCompletesLikeTheReference(const std::string& id) {
    auto done = WaitJob(*jobs_, id, Ended, absl::Seconds(60));
    EXPECT_TRUE(done.ok()) << done.status();
    if (!done.ok()) return {};
    EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();
    const std::vector<double> losses(done->losses().begin(), done->losses().end());
    EXPECT_EQ(losses, reference_losses_);  // bitwise
    const std::vector<std::string> weights = FinalCheckpoint(ckpt_dir(), num_stages_);
    for (int s = 0; s < num_stages_; ++s) {
      EXPECT_TRUE(weights[s] == reference_weights_[s])
          << "stage " << s << ": the final checkpoint differs from the uninterrupted run's ("
          << weights[s].size() << " vs " << reference_weights_[s].size() << " bytes)";
    }
    EXPECT_EQ(done->checkpoint_step(), kSteps);
    EXPECT_EQ(model::ReadCheckpointManifest(ckpt_dir())->step, kSteps);
    return *done;
  }

  std::string ckpt_dir() const { return cluster_->dir() + "/ckpt"; }

  std::unique_ptr<Cluster> cluster_;
  testing::Process coordinator_;
  std::vector<testing::Process> workers_;
  std::unique_ptr<client::JobClient> jobs_;
  std::vector<double> reference_losses_;
  std::vector<std::string> reference_weights_;
  int num_stages_ = 0;
};

TEST_F(FaultToleranceTest, KilledWorkerIsReplacedAndTheJobEndsAsIfUninterrupted) {
  const std::string id = SubmitAndWaitForCheckpoint(4);
  ASSERT_FALSE(id.empty());
  const absl::Time killed = absl::Now();
  testing::Kill(workers_[1], SIGKILL);
  const double detection_ms = MillisUntilRecovering(id, killed);
  std::printf("detection: kill -9 of a worker -> RECOVERING in %.0f ms (default settings)\n",
              detection_ms);
  EXPECT_LT(detection_ms, 5000);
  cluster_->StartWorker("replacement");
  const v1::Job job = ExpectCompletesLikeTheReference(id);
  ASSERT_EQ(job.recoveries_size(), 1);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_GE(job.recoveries(0).resume_step(), 4);
  EXPECT_EQ(job.recoveries(0).resume_step() % kInterval, 0);
  std::printf("resumed from checkpoint step-%d\n", job.recoveries(0).resume_step());
}

TEST_F(FaultToleranceTest, CheckpointTornByAKillIsNeverUsed) {
  // Restart w1 with the hook (the reference run is done).
  testing::Kill(workers_[1], SIGTERM);
  ASSERT_EQ(cluster_->Wait(workers_[1], absl::Seconds(15)), 0);
  workers_[1] = cluster_->StartWorker("w1-crashing", {"--crash-in-checkpoint", "6"});
  auto submitted = jobs_->Submit(Spec(ckpt_dir()));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->id();
  ASSERT_EQ(cluster_->Wait(workers_[1], absl::Seconds(60)), 128 + SIGKILL)
      << "the crashing worker should have died by SIGKILL";
  auto recovering = WaitJob(
      *jobs_, id, [](const v1::Job& j) { return j.restarts() > 0 || Ended(j); }, absl::Seconds(30));
  ASSERT_TRUE(recovering.ok()) << recovering.status();
  ASSERT_EQ(recovering->recoveries_size(), 1);
  // Step-6 was torn: one stage file is only a temp file; the resume uses step-4.
  EXPECT_EQ(recovering->recoveries(0).resume_step(), 4);
  bool temp_file = false;
  for (const auto& entry :
       std::filesystem::directory_iterator(model::CheckpointStepDir(ckpt_dir(), 6))) {
    temp_file = temp_file || entry.path().filename().string().find(".tmp-") != std::string::npos;
  }
  EXPECT_TRUE(temp_file) << "the killed writer should have left a temp file in step-6";
  cluster_->StartWorker("replacement");
  const v1::Job job = ExpectCompletesLikeTheReference(id);
  EXPECT_EQ(job.recoveries(0).resume_step(), 4);
}

// A stopped worker (SIGSTOP: alive, silent, its connections open) is found only by the
// heartbeat deadline: default settings.
TEST_F(FaultToleranceTest, StoppedWorkerIsFoundByTheHeartbeatDeadline) {
  const std::string id = SubmitAndWaitForCheckpoint(4);
  ASSERT_FALSE(id.empty());
  const absl::Time stopped = absl::Now();
  testing::Kill(workers_[2], SIGSTOP);
  const double detection_ms = MillisUntilRecovering(id, stopped);
  std::printf(
      "detection: SIGSTOP of a worker -> RECOVERING in %.0f ms (heartbeat deadline, "
      "default settings)\n",
      detection_ms);
  EXPECT_LT(detection_ms, 5000);
  const v1::Job job = jobs_->Get(id).value();
  EXPECT_NE(job.recoveries(0).reason().find("missed heartbeats"), std::string::npos)
      << job.recoveries(0).reason();
  cluster_->StartWorker("replacement");
  ExpectCompletesLikeTheReference(id);
  testing::Kill(workers_[2], SIGKILL);
  testing::Kill(workers_[2], SIGCONT);
  cluster_->Wait(workers_[2], absl::Seconds(5));
}

TEST_F(FaultToleranceTest, KilledCoordinatorRestartsAndTheJobCompletes) {
  const std::string id = SubmitAndWaitForCheckpoint(4);
  ASSERT_FALSE(id.empty());
  testing::Kill(coordinator_, SIGKILL);
  ASSERT_TRUE(cluster_->Wait(coordinator_, absl::Seconds(5)).has_value());
  coordinator_ = cluster_->StartCoordinator();
  const v1::Job job = ExpectCompletesLikeTheReference(id);
  ASSERT_GE(job.recoveries_size(), 1);
  EXPECT_EQ(job.recoveries(0).reason(), "coordinator restarted");
  EXPECT_EQ(job.restarts(), 0);  // a coordinator restart does not use the budget
  std::printf("resumed from checkpoint step-%d after the coordinator restart\n",
              job.recoveries(0).resume_step());
}

// SIGTERM: the worker says it leaves, exits 0, and the job resumes on a replacement; then the
// coordinator gets SIGTERM, exits 0 leaving the job to resume, and a new one finishes it.
TEST_F(FaultToleranceTest, SigtermOnAWorkerAndOnTheCoordinatorIsGraceful) {
  const std::string id = SubmitAndWaitForCheckpoint(4);
  ASSERT_FALSE(id.empty());
  const absl::Time term = absl::Now();
  testing::Kill(workers_[3], SIGTERM);
  const double detection_ms = MillisUntilRecovering(id, term);
  std::printf("detection: SIGTERM of a worker -> RECOVERING in %.0f ms\n", detection_ms);
  EXPECT_EQ(cluster_->Wait(workers_[3], absl::Seconds(15)), 0);
  v1::Job job = jobs_->Get(id).value();
  EXPECT_NE(job.recoveries(0).reason().find("shutting down"), std::string::npos)
      << job.recoveries(0).reason();
  cluster_->StartWorker("replacement");
  // Let it run past its next checkpoint, then stop the coordinator gracefully.
  const int next = job.recoveries(0).resume_step() + kInterval;
  auto resumed = WaitJob(
      *jobs_, id, [&](const v1::Job& j) { return j.checkpoint_step() >= next || Ended(j); },
      absl::Seconds(60));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->state(), v1::JOB_STATE_RUNNING);
  testing::Kill(coordinator_, SIGTERM);
  EXPECT_EQ(cluster_->Wait(coordinator_, absl::Seconds(15)), 0);
  coordinator_ = cluster_->StartCoordinator();
  job = ExpectCompletesLikeTheReference(id);
  ASSERT_GE(job.recoveries_size(), 2);
  EXPECT_EQ(job.recoveries(1).reason(), "coordinator shutting down");
  EXPECT_EQ(job.restarts(), 1);
}

// Cancel stops a running job on every worker promptly: all four are free for the next job.
TEST_F(FaultToleranceTest, CancelStopsTheJobOnEveryWorker) {
  v1::JobSpec spec = Spec(ckpt_dir());
  spec.mutable_training()->set_steps(100000);
  auto submitted = jobs_->Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(WaitJob(
                  *jobs_, submitted->id(), [](const v1::Job& j) { return j.steps_done() >= 2; },
                  absl::Seconds(30))
                  .ok());
  const absl::Time cancelled = absl::Now();
  ASSERT_EQ(jobs_->Cancel(submitted->id())->state(), v1::JOB_STATE_CANCELLED);
  v1::JobSpec next = testing::SmallJob("1f1b", kWorkers, 4, 2);
  auto second = jobs_->Submit(next);
  ASSERT_TRUE(second.ok()) << second.status();
  auto ran = WaitJob(
      *jobs_, second->id(),
      [](const v1::Job& j) {
        return j.state() != v1::JOB_STATE_QUEUED && j.state() != v1::JOB_STATE_PLANNING &&
               j.state() != v1::JOB_STATE_WAITING_FOR_WORKERS;
      },
      absl::Seconds(10));
  ASSERT_TRUE(ran.ok()) << ran.status();
  std::printf("cancel: the next job had all %d workers after %.0f ms\n", kWorkers,
              absl::ToDoubleMilliseconds(absl::Now() - cancelled));
  auto done = WaitJob(*jobs_, second->id(), Ended, absl::Seconds(30));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();
}

// One worker in its own network namespace, joined by a veth pair; every daemon listens on the
// pair's addresses. Skipped where namespaces cannot be made (not root, no iproute2).
class NetworkPartitionTest : public FaultToleranceTest {
 protected:
  static constexpr int kPartitioned = 2;

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::NetworkNamespace>> ns =
        testing::NetworkNamespace::Create();
    if (!ns.ok()) GTEST_SKIP() << "no network namespace for a partition: " << ns.status();
    ns_ = *std::move(ns);
    FaultToleranceTest::SetUp();
  }
  void TearDown() override {
    FaultToleranceTest::TearDown();
    cluster_.reset();  // its processes go before their namespace
    ns_.reset();
  }
  std::string ClusterHost() override { return ns_->host_ip(); }
  const testing::NetworkNamespace* WorkerNamespace(int i) override {
    return i == kPartitioned ? ns_.get() : nullptr;
  }

  std::unique_ptr<testing::NetworkNamespace> ns_;
};

// The partitioned worker lives on with its connections stalled (no reset reaches anyone): the
// coordinator finds it by the heartbeat deadline and aborts the others; the job waits, since
// three workers cannot run it; when the link heals the worker is told to register again,
// drops its stale run, and the job resumes on all four and ends like the uninterrupted run.
TEST_F(NetworkPartitionTest, PartitionedWorkerIsFoundAndTheJobResumesWhenTheLinkHeals) {
  const std::string id = SubmitAndWaitForCheckpoint(4);
  ASSERT_FALSE(id.empty());
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(ns_->SetConnected(false).ok());
  const double detection_ms = MillisUntilRecovering(id, cut);
  std::printf("detection: network partition of a worker -> RECOVERING in %.0f ms\n",
              detection_ms);
  EXPECT_LT(detection_ms, 5000);
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(jobs_->Get(id)->state(), v1::JOB_STATE_RECOVERING) << "3 workers cannot run it";
  const absl::Time healed = absl::Now();
  ASSERT_TRUE(ns_->SetConnected(true).ok());
  auto resumed = WaitJob(
      *jobs_, id, [](const v1::Job& j) { return j.state() != v1::JOB_STATE_RECOVERING; },
      absl::Seconds(30));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  std::printf("the link healed -> the job left RECOVERING in %.0f ms\n",
              absl::ToDoubleMilliseconds(absl::Now() - healed));
  const v1::Job job = ExpectCompletesLikeTheReference(id);
  ASSERT_GE(job.recoveries_size(), 1);
  EXPECT_NE(job.recoveries(0).reason().find("missed heartbeats"), std::string::npos)
      << job.recoveries(0).reason();
  for (const v1::JobRecovery& r : job.recoveries()) {
    std::printf("recovery: resumed from step %d: %s\n", r.resume_step(), r.reason().c_str());
  }
}


// 200 one-step jobs submitted back to back on two workers: each is dispatched the moment every rank
// of the previous one said "finished". None may be refused by a worker as "busy with job ..."
// (a worker used to report the end of its run before it cleared the job) nor spend a restart.
TEST(BackToBackJobsTest, ShortJobsDrainWithoutARestart) {
  Cluster cluster("127.0.0.1");
  cluster.StartCoordinator();
  cluster.StartWorker("w0");
  cluster.StartWorker("w1");
  client::JobClient jobs(cluster.address(), "", client::ClientTls{}, absl::Seconds(5));
  constexpr int kJobs = 200;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    v1::JobSpec spec = testing::SmallJob("1f1b", 2, 2, 1);
    spec.mutable_parallelism()->set_analytic_costs(true);  // no profiling step: short jobs
    auto submitted = jobs.Submit(spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    ids.push_back(submitted->id());
  }
  for (const std::string& id : ids) {
    auto done = WaitJob(jobs, id, Ended, absl::Seconds(60));
    ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster.Logs();
    EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << id << ": " << done->failure_reason();
    EXPECT_EQ(done->restarts(), 0) << id;
    for (const v1::JobRecovery& r : done->recoveries()) ADD_FAILURE() << id << ": " << r.reason();
  }
}

// Data parallelism through the coordinator: 2 replicas x 2 pipeline ranks on the 4 workers. The
// uninterrupted job trains bitwise like the single-process reference on the global batch; then
// kill -9 of a worker of replica 1 (job rank 2 or 3) mid-run: the job recovers on a
// replacement from the common checkpoint (replica 0 wrote it) and ends with the same losses and
// byte-identical final checkpoint files.
TEST(DataParallelFaultTest, KilledReplicaOneWorkerResumesAsIfUninterrupted) {
  Cluster cluster("127.0.0.1");
  cluster.StartCoordinator();
  std::map<std::string, testing::Process> by_name;
  for (int i = 0; i < 4; ++i) {
    const std::string name = absl::StrCat("w", i);
    by_name.emplace(name, cluster.StartWorker(name));
  }
  client::JobClient jobs(cluster.address(), "", client::ClientTls{}, absl::Seconds(5));
  auto spec_for = [&](const std::string& dir) {
    v1::JobSpec spec = testing::SmallJob("1f1b", 2, 8, kSteps);
    spec.mutable_parallelism()->set_data_parallel(2);
    spec.mutable_checkpoint()->set_dir(dir);
    spec.mutable_checkpoint()->set_interval_steps(kInterval);
    spec.mutable_checkpoint()->set_keep_last(2);
    return spec;
  };
  // Uninterrupted: bitwise the reference trainer on all 8 microbatches of every step.
  const v1::JobSpec reference_spec = spec_for(cluster.dir() + "/dp-reference-ckpt");
  auto first = jobs.Submit(reference_spec);
  ASSERT_TRUE(first.ok()) << first.status();
  auto done = WaitJob(jobs, first->id(), Ended, absl::Seconds(90));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason() << cluster.Logs();
  ASSERT_EQ(done->worker_ids_size(), 4);
  const std::vector<double> losses(done->losses().begin(), done->losses().end());
  ASSERT_EQ(losses, testing::ReferenceLosses(reference_spec));
  const int stages = done->plan().stage_to_worker_size();
  const std::vector<std::string> reference_weights =
      FinalCheckpoint(reference_spec.checkpoint().dir(), stages);

  // Again, with a kill -9 of replica 1's worker of pipeline rank 1 (job rank 3).
  const v1::JobSpec spec = spec_for(cluster.dir() + "/dp-ckpt");
  auto submitted = jobs.Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto running = WaitJob(
      jobs, submitted->id(),
      [](const v1::Job& j) { return j.checkpoint_step() >= 4 || Ended(j); }, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ(running->state(), v1::JOB_STATE_RUNNING) << "ended before the fault";
  const std::string victim_id = running->worker_ids(3);
  auto workers = jobs.ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  std::string victim;
  for (const v1::WorkerSummary& w : workers->workers()) {
    if (w.id() == victim_id) victim = w.name();
  }
  ASSERT_EQ(by_name.count(victim), 1u) << "job rank 3 runs on unknown worker " << victim_id;
  testing::Kill(by_name.at(victim), SIGKILL);
  cluster.StartWorker("replacement");
  auto recovered = WaitJob(jobs, submitted->id(), Ended, absl::Seconds(120));
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->state(), v1::JOB_STATE_SUCCEEDED)
      << recovered->failure_reason() << cluster.Logs();
  EXPECT_GE(recovered->recoveries_size(), 1);
  const std::vector<double> resumed(recovered->losses().begin(), recovered->losses().end());
  EXPECT_EQ(resumed, losses);  // bitwise
  const std::vector<std::string> weights = FinalCheckpoint(spec.checkpoint().dir(), stages);
  for (int s = 0; s < stages; ++s) {
    EXPECT_TRUE(weights[s] == reference_weights[s])
        << "stage " << s << ": the final checkpoint differs from the uninterrupted run's";
  }
}

}  // namespace
}  // namespace pipetrain
