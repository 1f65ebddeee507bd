// The whole system as real processes: a coordinator and 4 CPU workers on loopback (the
// LocalCluster `pipetrain local` uses). A V-Half job runs to SUCCEEDED through the real gRPC
// services; its per-step losses equal the single-process reference trainer's bitwise; every
// rank's measured peak activation bytes equal the plan's prediction; `pipetrain status` shows
// predicted next to measured; both daemons' /metrics carry the job's series and pass
// `promtool check metrics`; a real Prometheus server scrapes them and answers queries with the
// right values.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/job_client.h"
#include "client/job_commands.h"
#include "client/local_cluster.h"
#include "nlohmann/json.hpp"
#include "schedule/codec/plan_proto.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/http_get.h"
#include "tests/e2e/process_util.h"
#include "tests/e2e/shell.h"

namespace pipetrain {
namespace {

using testing::Shell;

constexpr int kWorkers = 4;
constexpr int kSteps = 5;

class LocalClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    client::LocalClusterOptions options;
    options.workers = kWorkers;
    options.coordinator_bin = PIPETRAIN_COORDINATOR_BIN;
    options.worker_bin = PIPETRAIN_WORKER_BIN;
    auto started = client::LocalCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = started->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static client::LocalCluster* cluster_;
};
client::LocalCluster* LocalClusterTest::cluster_ = nullptr;

TEST_F(LocalClusterTest, VHalfJobSucceedsWithReferenceLossesAndPredictedMemory) {
  ASSERT_NE(cluster_, nullptr);
  const v1::JobSpec spec = testing::SmallJob("v-half", kWorkers, 8, kSteps);
  client::JobClient jobs(cluster_->coordinator_address(), "");
  auto submitted = jobs.Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  std::ostringstream out, err;
  auto done = client::WatchJob(jobs, submitted->id(), false, out, err);
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << out.str();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();
  EXPECT_NE(out.str().find("RUNNING"), std::string::npos) << out.str();

  const std::vector<double> reference = testing::ReferenceLosses(spec);
  ASSERT_EQ(done->losses_size(), kSteps);
  for (int s = 0; s < kSteps; ++s) EXPECT_EQ(done->losses(s), reference[s]) << "step " << s;
  EXPECT_EQ(done->last_loss(), reference.back());

  const v1::Prediction& predicted = done->plan().prediction();
  ASSERT_EQ(done->measured_peak_activation_bytes_size(), kWorkers);
  ASSERT_EQ(predicted.peak_activation_bytes_size(), kWorkers);
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(done->measured_peak_activation_bytes(r), predicted.peak_activation_bytes(r))
        << "rank " << r;
  }
  EXPECT_GT(done->last_step_s(), 0);
  EXPECT_GT(done->tokens_per_s(), 0);

  // `pipetrain status` shows the plan's predictions next to the measurements.
  std::string status_out;
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " status --coordinator ",
                               cluster_->coordinator_address(), " ", done->id()),
                  &status_out),
            0)
      << status_out;
  EXPECT_NE(status_out.find("SUCCEEDED"), std::string::npos) << status_out;
  EXPECT_NE(status_out.find("predicted   measured"), std::string::npos) << status_out;
  EXPECT_NE(status_out.find("rank 3:"), std::string::npos) << status_out;
  // The workers ran the profiling step and the job was planned with their measured times.
  EXPECT_TRUE(done->plan().costs_measured());
  EXPECT_NE(status_out.find("costs measured (profiling step)"), std::string::npos) << status_out;

  // The newest step's measured timeline: every rank, one timing per planned action.
  auto trace = jobs.GetStepTrace(done->id(), -1);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->step(), kSteps - 1);
  ASSERT_EQ(trace->ranks_size(), kWorkers);
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(trace->ranks(r).rank(), r);
    EXPECT_EQ(trace->ranks(r).timings_size(), done->plan().workers(r).actions_size()) << r;
  }
  // ... and `pipetrain trace` writes it as a Chrome trace with one event per action.
  const std::string trace_file = absl::StrCat(cluster_->dir(), "/step.json");
  std::string trace_out;
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " trace --coordinator ",
                               cluster_->coordinator_address(), " ", done->id(), " --step 0 -o ",
                               trace_file),
                  &trace_out),
            0)
      << trace_out;
  EXPECT_NE(trace_out.find(absl::StrCat(done->id(), " step 0 (v-half, 4 workers)")),
            std::string::npos)
      << trace_out;
  std::ifstream in(trace_file);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int events = 0;
  for (size_t at = json.find("\"ph\":\"X\""); at != std::string::npos;
       at = json.find("\"ph\":\"X\"", at + 1)) {
    ++events;
  }
  int actions = 0;
  for (const v1::WorkerActions& w : done->plan().workers()) actions += w.actions_size();
  EXPECT_EQ(events, actions);

  // Both daemons' expositions carry the job and pass promtool's lint.
  auto coordinator_metrics = testing::HttpGet(cluster_->coordinator_metrics_address(), "/metrics");
  ASSERT_TRUE(coordinator_metrics.ok()) << coordinator_metrics.status();
  EXPECT_NE(coordinator_metrics->find(absl::StrCat("pipetrain_job_steps_total{job_id=\"", done->id())),
            std::string::npos)
      << *coordinator_metrics;
  for (const std::string& address : cluster_->worker_metrics_addresses()) {
    auto worker_metrics = testing::HttpGet(address, "/metrics");
    ASSERT_TRUE(worker_metrics.ok()) << worker_metrics.status();
    // Each worker's series carry the job, its rank and replica there:
    // "...{job_id="J",rank="R",replica="0"} 3".
    const std::string prefix =
        absl::StrCat("pipetrain_worker_steps_total{job_id=\"", done->id(), "\",rank=\"");
    const size_t at = worker_metrics->find(prefix);
    ASSERT_NE(at, std::string::npos) << *worker_metrics;
    const std::string line = worker_metrics->substr(at, worker_metrics->find('\n', at) - at);
    EXPECT_TRUE(absl::EndsWith(line, absl::StrCat("\"} ", kSteps))) << line;
    EXPECT_NE(worker_metrics->find("pipetrain_build_info{program=\"pipetrain-worker\""),
              std::string::npos)
        << *worker_metrics;
    const std::string file = absl::StrCat(cluster_->dir(), "/exposition.txt");
    std::ofstream(file) << *worker_metrics;
    std::string lint;
    EXPECT_EQ(Shell(absl::StrCat("promtool check metrics < ", file), &lint), 0) << lint;
  }
  const std::string file = absl::StrCat(cluster_->dir(), "/coordinator-exposition.txt");
  std::ofstream(file) << *coordinator_metrics;
  std::string lint;
  EXPECT_EQ(Shell(absl::StrCat("promtool check metrics < ", file), &lint), 0) << lint;
}

// A real Prometheus server (Debian's `prometheus`) scrapes both daemons; its HTTP API returns
// the step count and the measured peak memory the job reported.
TEST_F(LocalClusterTest, PrometheusScrapesBothDaemons) {
  ASSERT_NE(cluster_, nullptr);
  const v1::JobSpec spec = testing::SmallJob("1f1b", kWorkers, 4, 3);
  client::JobClient jobs(cluster_->coordinator_address(), "");
  auto submitted = jobs.Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  std::ostringstream out, err;
  auto done = client::WatchJob(jobs, submitted->id(), false, out, err);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();

  const std::string dir = cluster_->dir();
  std::string targets = absl::StrCat("'", cluster_->coordinator_metrics_address(), "'");
  for (const std::string& a : cluster_->worker_metrics_addresses()) {
    absl::StrAppend(&targets, ", '", a, "'");
  }
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pipetrain\n"
      << "    static_configs:\n      - targets: [" << targets << "]\n";
  const int port = testing::FreePort();
  const std::string web = absl::StrCat("127.0.0.1:", port);
  testing::Process prometheus = testing::Spawn(
      {"/usr/bin/prometheus", "--config.file=" + dir + "/prometheus.yml",
       "--storage.tsdb.path=" + dir + "/tsdb", "--web.listen-address=" + web},
      dir + "/prometheus");
  // Wait until the job's series has been scraped (bounded).
  const std::string query = absl::StrCat("/api/v1/query?query=pipetrain_job_steps_total%7Bjob_id%3D%22",
                                         done->id(), "%22%7D");
  nlohmann::json answer;
  const absl::Time deadline = absl::Now() + absl::Seconds(40);
  while (absl::Now() < deadline) {
    auto body = testing::HttpGet(web, query);
    if (body.ok()) {
      answer = nlohmann::json::parse(*body, nullptr, false);
      if (answer.is_object() && answer["data"]["result"].size() == 1) break;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  ASSERT_TRUE(answer.is_object()) << testing::ReadFile(prometheus.stderr_path);
  ASSERT_EQ(answer["data"]["result"].size(), 1u) << answer.dump();
  EXPECT_EQ(answer["data"]["result"][0]["value"][1].get<std::string>(), "3");

  // The job's measured peak per rank (the coordinator's, max over steps) and each worker's own
  // last-step peak: the plan is exact, so every step peaks the same and the two agree rank by
  // rank. Prometheus scrapes each target on its own schedule: wait (bounded) until it has every
  // rank of both.
  std::map<std::string, double> expected;  // by rank
  for (int r = 0; r < done->measured_peak_activation_bytes_size(); ++r) {
    expected[absl::StrCat(r)] = static_cast<double>(done->measured_peak_activation_bytes(r));
  }
  for (const std::string& series :
       {std::string("pipetrain_job_peak_activation_bytes%7Bkind%3D%22measured%22%7D"),
        absl::StrCat("pipetrain_worker_peak_activation_bytes%7Bjob_id%3D%22", done->id(),
                     "%22%7D")}) {
    nlohmann::json result;
    for (const absl::Time until = absl::Now() + absl::Seconds(20); absl::Now() < until;
         absl::SleepFor(absl::Milliseconds(500))) {
      auto peak = testing::HttpGet(web, "/api/v1/query?query=" + series);
      ASSERT_TRUE(peak.ok()) << peak.status();
      result = nlohmann::json::parse(*peak)["data"]["result"];
      if (result.size() == expected.size()) break;
    }
    ASSERT_EQ(result.size(), expected.size()) << series << result.dump();
    std::map<std::string, double> scraped;
    for (const nlohmann::json& sample : result) {
      scraped[sample["metric"]["rank"].get<std::string>()] =
          std::stod(sample["value"][1].get<std::string>());
    }
    EXPECT_EQ(scraped, expected) << series;
  }
  testing::Kill(prometheus, SIGTERM);
  testing::WaitFor(prometheus, absl::Seconds(10));
}

// `--json` keeps stdout machine-readable: `submit --watch --json` and `watch --json` print only
// protobuf JSON there, one object per line (every JobEvent, then the final job), and the human
// lines ("submitted ...", states, progress) on stderr.
TEST_F(LocalClusterTest, JsonOutputHoldsOnlyJsonLines) {
  ASSERT_NE(cluster_, nullptr);
  const std::string dir = cluster_->dir();
  const std::string job_file = dir + "/json_job.json";
  {
    absl::StatusOr<std::string> json = schedule::ToJson(testing::SmallJob("1f1b", 2, 4, 3));
    ASSERT_TRUE(json.ok()) << json.status();
    std::ofstream(job_file) << *json;
  }
  const std::string common = absl::StrCat(" --coordinator ", cluster_->coordinator_address());
  std::string out;
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " submit ", job_file, " --watch --json",
                               common, " 2>", dir, "/submit.err"),
                  &out),
            0)
      << out << testing::ReadFile(dir + "/submit.err");
  const auto json_lines = [](const std::string& text) {
    std::vector<nlohmann::json> objects;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      objects.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
      EXPECT_TRUE(objects.back().is_object()) << "not a JSON object: " << line;
    }
    return objects;
  };
  std::vector<nlohmann::json> objects = json_lines(out);
  ASSERT_GE(objects.size(), 3u) << out;
  int steps = 0;
  for (size_t i = 0; i + 1 < objects.size(); ++i) {
    EXPECT_TRUE(objects[i].contains("job")) << objects[i].dump();  // a JobEvent
    if (objects[i].contains("step")) ++steps;
  }
  EXPECT_EQ(steps, 3) << out;
  const nlohmann::json& final_job = objects.back();
  EXPECT_EQ(final_job["state"], "JOB_STATE_SUCCEEDED") << final_job.dump();
  const std::string id = final_job["id"];
  const std::string err = testing::ReadFile(dir + "/submit.err");
  EXPECT_NE(err.find("submitted " + id), std::string::npos) << err;
  EXPECT_NE(err.find("SUCCEEDED"), std::string::npos) << err;

  // `watch --json` of the finished job: its last event, then the job.
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " watch ", id, " --json", common,
                               " 2>/dev/null"),
                  &out),
            0)
      << out;
  objects = json_lines(out);
  ASSERT_GE(objects.size(), 2u) << out;
  EXPECT_EQ(objects.back()["id"], id);
  EXPECT_EQ(objects.back()["state"], "JOB_STATE_SUCCEEDED");
}

// `pipetrain validate` asks the coordinator to check and plan a job file without submitting it:
// a good file prints the plan (exit 0), a bad one the field and what is allowed (exit 2), and
// no job is created either way; `plan --job FILE --dry-run` is the same.
TEST_F(LocalClusterTest, ValidateChecksAndPlansWithoutSubmitting) {
  ASSERT_NE(cluster_, nullptr);
  client::JobClient jobs(cluster_->coordinator_address(), "");
  const size_t before = jobs.List(v1::JOB_STATE_UNSPECIFIED).value().size();
  const std::string dir = cluster_->dir();
  v1::JobSpec spec = testing::SmallJob("v-half", kWorkers, 8, 3);
  std::ofstream(dir + "/good.json") << schedule::ToJson(spec).value();
  spec.mutable_training()->set_microbatch_size(3);  // 8 sequences do not split into 3s
  std::ofstream(dir + "/bad.json") << schedule::ToJson(spec).value();
  const std::string common = absl::StrCat(" --coordinator ", cluster_->coordinator_address());
  std::string out;
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " validate ", dir, "/good.json", common),
                  &out),
            0)
      << out;
  EXPECT_NE(out.find("good.json: valid"), std::string::npos) << out;
  EXPECT_NE(out.find(absl::StrCat("plan: v-half on ", kWorkers, " workers x 2 chunks")),
            std::string::npos)
      << out;
  EXPECT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " validate ", dir, "/bad.json", common),
                  &out),
            2)
      << out;
  EXPECT_NE(out.find("training.microbatch_size"), std::string::npos) << out;
  // The same dry run as `plan --job FILE --dry-run`.
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " plan --job ", dir, "/good.json --dry-run",
                               common),
                  &out),
            0)
      << out;
  EXPECT_NE(out.find(absl::StrCat("plan: v-half on ", kWorkers, " workers x 2 chunks")),
            std::string::npos)
      << out;
  EXPECT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " plan --job ", dir, "/bad.json --dry-run",
                               common),
                  &out),
            2)
      << out;
  EXPECT_NE(out.find("training.microbatch_size"), std::string::npos) << out;
  EXPECT_EQ(jobs.List(v1::JOB_STATE_UNSPECIFIED).value().size(), before);
}

// `pipetrain workers` lists the registry: every local worker, its state and device.
TEST_F(LocalClusterTest, WorkersListsTheRegistry) {
  ASSERT_NE(cluster_, nullptr);
  const std::string common = absl::StrCat(" --coordinator ", cluster_->coordinator_address());
  std::string out;
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " workers", common), &out), 0) << out;
  EXPECT_NE(out.find("ID "), std::string::npos) << out;
  for (int i = 1; i <= kWorkers; ++i) {
    EXPECT_NE(out.find(absl::StrFormat("worker-%06d", i)), std::string::npos) << out;
  }
  ASSERT_EQ(Shell(absl::StrCat(PIPETRAIN_CLIENT_BIN, " workers --json", common, " 2>/dev/null"),
                  &out),
            0)
      << out;
  const nlohmann::json workers = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(workers.is_object()) << out;
  ASSERT_EQ(workers["workers"].size(), static_cast<size_t>(kWorkers)) << out;
  for (const nlohmann::json& w : workers["workers"]) {
    EXPECT_EQ(w["device"], "DEVICE_KIND_CPU") << w.dump();
    EXPECT_TRUE(w["state"] == "idle" || w["state"] == "busy") << w.dump();
    EXPECT_FALSE(w.contains("session_token")) << w.dump();
  }
}

}  // namespace
}  // namespace pipetrain
