// `pipetrain export JOB` against a running coordinator (real processes): a job with checkpoints
// runs to SUCCEEDED on a local cluster; the CLI asks the coordinator for the job and writes its
// newest committed checkpoint, or a named one, as a safetensors file whose tensors are bitwise
// the stage files' values; a step that does not exist, a job without checkpoint.dir and a bad
// flag fail with messages that say so.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/job_client.h"
#include "client/job_commands.h"
#include "client/local_cluster.h"
#include "model/exported_model.h"
#include "model/safetensors.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/process_util.h"

namespace pipetrain {
namespace {

struct Cli {
  int code = -1;
  std::string out, err;
};

TEST(ExportCli, ExportsACommittedCheckpointThroughTheCoordinator) {
  client::LocalClusterOptions options;
  options.workers = 2;
  options.coordinator_bin = PIPETRAIN_COORDINATOR_BIN;
  options.worker_bin = PIPETRAIN_WORKER_BIN;
  auto cluster = client::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string dir = testing::TempDir();
  auto run = [&](std::vector<std::string> args) {
    static int calls = 0;
    args.insert(args.begin(), PIPETRAIN_CLIENT_BIN);
    args.push_back("--coordinator");
    args.push_back((*cluster)->coordinator_address());
    const std::string log = absl::StrCat(dir, "/cli", calls++);
    testing::Process p = testing::Spawn(args, log);
    Cli cli;
    cli.code = testing::WaitFor(p, absl::Seconds(60)).value_or(-1);
    cli.out = testing::ReadFile(log + ".out");
    cli.err = testing::ReadFile(log + ".err");
    return cli;
  };

  v1::JobSpec spec = testing::SmallJob("1f1b", 2, 4, 4);
  spec.mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec.mutable_checkpoint()->set_interval_steps(2);
  client::JobClient jobs((*cluster)->coordinator_address(), "");
  auto submitted = jobs.Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  std::ostringstream out, err;
  auto done = client::WatchJob(jobs, submitted->id(), false, out, err);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();
  ASSERT_EQ(done->checkpoint_step(), 4);

  Cli cli = run({"export", done->id(), "-o", dir + "/latest.safetensors"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_NE(cli.out.find(absl::StrCat("step 4 of ", done->id())), std::string::npos) << cli.out;
  auto latest = model::SafetensorsFile::Open(dir + "/latest.safetensors");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->metadata().at("pipetrain.step"), "4");
  EXPECT_EQ(latest->metadata().at("pipetrain.job"), done->id());
  // Bitwise the checkpoint's values (the checkpoint is bitwise the reference trainer's,
  // WorkerProcessesTest shows), in the stage files' model order.
  const std::vector<std::vector<float>> weights =
      testing::CheckpointWeights(done->spec(), dir + "/ckpt", 4, done->plan().num_stages());
  ASSERT_EQ(weights.size(), latest->tensors().size());
  for (size_t i = 0; i < weights.size(); ++i) {
    const model::SafetensorsFile::Tensor& t = latest->tensors()[i];
    if (t.name == "lm_head.weight") continue;  // transposed; export_test checks it
    const std::vector<float> v = latest->Values(t);
    ASSERT_EQ(v.size(), weights[i].size()) << t.name;
    EXPECT_EQ(std::memcmp(v.data(), weights[i].data(), v.size() * 4), 0) << t.name;
  }

  cli = run({"export", done->id(), "--step", "2", "-o", dir + "/step2.safetensors"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  auto step2 = model::SafetensorsFile::Open(dir + "/step2.safetensors");
  ASSERT_TRUE(step2.ok());
  EXPECT_EQ(step2->metadata().at("pipetrain.step"), "2");

  cli = run({"export", done->id(), "--step", "3", "-o", dir + "/x.safetensors"});
  EXPECT_EQ(cli.code, 1);
  EXPECT_NE(cli.err.find("step 3: " + dir + "/ckpt/step-3 does not exist; complete checkpoints: 2, 4"),
            std::string::npos)
      << cli.err;
  cli = run({"export", done->id(), "--step", "-1", "-o", dir + "/x.safetensors"});
  EXPECT_EQ(cli.code, 2);
  EXPECT_NE(cli.err.find("--step"), std::string::npos) << cli.err;
  cli = run({"export", done->id()});
  EXPECT_EQ(cli.code, 2);
  EXPECT_NE(cli.err.find("--output"), std::string::npos) << cli.err;

  v1::JobSpec plain = testing::SmallJob("1f1b", 2, 4, 1);
  auto second = jobs.Submit(plain);
  ASSERT_TRUE(second.ok());
  auto finished = client::WatchJob(jobs, second->id(), false, out, err);
  ASSERT_TRUE(finished.ok());
  cli = run({"export", second->id(), "-o", dir + "/y.safetensors"});
  EXPECT_EQ(cli.code, 1);
  EXPECT_NE(cli.err.find(absl::StrCat(second->id(), " has no checkpoint.dir")), std::string::npos)
      << cli.err;
}

}  // namespace
}  // namespace pipetrain
