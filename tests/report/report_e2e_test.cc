// `pipetrain report` against real processes: a coordinator and 2 CPU workers (LocalCluster) run
// a small 1F1B job; the report built from the coordinator's kept step trace shows, per worker,
// exactly the predicted peak activation bytes (the stash bytes are exact on the CPU backend),
// and the CLI writes the SVG and prints the summary.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/job_client.h"
#include "client/job_commands.h"
#include "client/local_cluster.h"
#include "client/report.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/shell.h"

namespace pipetrain {
namespace {

using testing::Shell;

TEST(ReportE2eTest, ReportOfAFinishedJobMatchesPredictedMemory) {
  constexpr int kWorkers = 2, kSteps = 3;
  client::LocalClusterOptions options;
  options.workers = kWorkers;
  options.coordinator_bin = PIPETRAIN_COORDINATOR_BIN;
  options.worker_bin = PIPETRAIN_WORKER_BIN;
  auto cluster = client::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string address = (*cluster)->coordinator_address();

  client::JobClient jobs(address, "");
  auto submitted = jobs.Submit(testing::SmallJob("1f1b", kWorkers, 4, kSteps));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  std::ostringstream out, err;
  auto done = client::WatchJob(jobs, submitted->id(), false, out, err);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();

  auto trace = jobs.GetStepTrace(done->id(), -1);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->step(), kSteps - 1);  // the newest kept step
  auto report = client::BuildJobReport(done->plan(), *trace);
  ASSERT_TRUE(report.ok()) << report.status();
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(report->measured.peak_memory[w], report->predicted.peak_memory[w]) << "worker " << w;
    EXPECT_EQ(report->predicted.peak_memory[w],
              static_cast<double>(done->plan().prediction().peak_activation_bytes(w)));
    EXPECT_GT(report->measured.peak_memory[w], 0);
  }
  EXPECT_GT(report->measured.makespan, 0);
  EXPECT_DOUBLE_EQ(report->predicted.makespan, done->plan().prediction().makespan_s());

  // The replay with the step's own costs: real workers' CPU times for every stage, a hop
  // measured from their messages (both ways, with receivers that waited), a step to compare.
  auto replayed = client::BuildJobReport(done->plan(), *trace, 2.0);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  ASSERT_TRUE(replayed->replay.has_value()) << replayed->replay_note;
  EXPECT_GT(replayed->replay->hops_measured, 0);
  EXPECT_GT(replayed->replay->hop_s, 0);
  for (const schedule::StageCost& c : replayed->replay->costs.stages) {
    EXPECT_GT(c.f, 0);
    EXPECT_GT(c.FusedBackward(), 0);
  }
  EXPECT_GT(replayed->replay->step_s, 0);

  const std::string svg_path = absl::StrCat((*cluster)->dir(), "/report.svg");
  std::string cli;
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " report --coordinator ", address, " ",
                               done->id(), " --step 0 --output ", svg_path),
                  &cli),
            0)
      << cli;
  EXPECT_NE(cli.find(absl::StrCat("job ", done->id(), " step 0: schedule 1f1b")),
            std::string::npos)
      << cli;
  EXPECT_NE(cli.find("peak activation bytes per worker"), std::string::npos) << cli;
  EXPECT_EQ(cli.find("replayed"), std::string::npos) << cli;  // only when asked for
  std::string with_replay;
  ASSERT_EQ(
      Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " report --coordinator ", address, " ", done->id(),
                         " --replay-host-cores 2 --output ", svg_path, ".replay.svg"),
            &with_replay),
      0)
      << with_replay;
  EXPECT_NE(with_replay.find("replayed with the step's own costs"), std::string::npos)
      << with_replay;
  EXPECT_NE(with_replay.find("the 2 ranks sharing 2 cores"), std::string::npos) << with_replay;
  std::ifstream in(svg_path);
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_EQ(svg.str().rfind("<svg", 0), 0u);
  EXPECT_NE(svg.str().find("measured (step 0)"), std::string::npos);

  std::string missing;
  EXPECT_NE(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " report --coordinator ", address,
                               " job-999999"),
                  &missing),
            0);
}

}  // namespace
}  // namespace pipetrain
