// Real worker processes over TCP on loopback: for every schedule, p = 2 and 4 pipetrain-worker
// processes train the default task from a plan file with the full training recipe (warmup, cosine
// decay, weight decay on every group, gradient clipping by the global norm at a threshold that
// clips some steps and not others, and tied input/output embeddings: in V schedules both copies sit
// on rank 0, elsewhere two ranks swap their gradients) and report, step by step, exactly the
// reference trainer's losses and gradient norms (bitwise: printed with 17 significant digits),
// which steps were clipped, and the planner's predicted peak activation bytes; the weights they
// checkpoint after the last step are bitwise the reference's (the ranks that update before the
// clipping verdict reaches them roll back and redo those steps: docs/training.md). A worker killed
// mid-run makes its neighbour fail the step with a clear error within a bounded time. A job on the
// "tokens" source (a corpus prepared from the repository's docs by `pipetrain data prepare`)
// matches the reference trainer too. So do bf16 jobs (bf16 GEMM inputs, activations stashed in
// bf16), against a reference trainer computing in bf16, with the planner's halved activation bytes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "planner/plan_file.h"
#include "planner/planner.h"
#include "schedule/codec/plan_proto.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/plan_files.h"
#include "tests/e2e/process_util.h"
#include "tests/e2e/token_corpus.h"
#include "worker/device/device_list.h"
#include "worker/service/step_line.h"

namespace pipetrain {
namespace {

constexpr int kSteps = 4;

struct Case {
  std::string schedule;
  int p;
  int m;
  bool bf16 = false;  // compute.precision PRECISION_BF16 (the reference trains in bf16 too)
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << (c.bf16 ? " bf16" : "");
}

class WorkerProcessesTest : public ::testing::TestWithParam<Case> {};

TEST_P(WorkerProcessesTest, TrainsExactlyLikeTheReference) {
  const Case& c = GetParam();
  const std::string dir = testing::TempDir();
  v1::JobSpec base = testing::WithRecipe(testing::SmallJob(c.schedule, c.p, c.m, kSteps));
  base.mutable_model()->set_tie_embeddings(true);
  if (c.bf16) base.mutable_compute()->set_precision(v1::PRECISION_BF16);
  v1::JobSpec spec = testing::WithClipping(base);
  spec.mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec.mutable_checkpoint()->set_interval_steps(kSteps);  // once, after the last step
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string plan_path = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  std::vector<testing::Process> workers;
  for (int r = 0; r < c.p; ++r) {
    workers.push_back(testing::Spawn(
        {PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank", std::to_string(r),
         "--connect-timeout", "20", "--recv-timeout", "30", "--report",
         absl::StrCat(dir, "/report", r, ".jsonl")},
        absl::StrCat(dir, "/rank", r)));
  }
  for (int r = 0; r < c.p; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(120));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung";
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
  }
  const testing::ReferenceRun ref = testing::RunReference(spec);
  const std::vector<double>& reference = ref.losses;
  ASSERT_EQ(reference.size(), static_cast<size_t>(kSteps));
  const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
  for (int r = 0; r < c.p; ++r) {
    auto steps = worker::ParseStepLines(testing::ReadFile(workers[r].stdout_path));
    ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps)) << "rank " << r;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(steps[s].peak_activation_bytes, std::llround(planned->sim.peak_memory[r]))
          << "rank " << r << " step " << s << ": measured vs predicted peak activation bytes";
      if (r == loss_rank) {
        double loss = 0;
        ASSERT_TRUE(absl::SimpleAtod(steps[s].loss, &loss)) << steps[s].loss;
        EXPECT_EQ(loss, reference[s]) << "step " << s;
      } else {
        EXPECT_EQ(steps[s].loss, "null");
      }
    }
  }
  EXPECT_LT(reference.back(), reference.front());
  // Clipping: some steps clipped, some not; the rank of stage 0 reports each step's norm and
  // whether it was clipped, as the reference computes them.
  ASSERT_EQ(ref.clipped.size(), static_cast<size_t>(kSteps));
  EXPECT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), true), 0) << "no step clipped";
  EXPECT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), false), 0) << "all steps clipped";
  const int verdict_rank = planned->schedule.WorkerOf(0);
  const std::vector<std::string> report = absl::StrSplit(
      testing::ReadFile(absl::StrCat(dir, "/report", verdict_rank, ".jsonl")), '\n',
      absl::SkipEmpty());
  ASSERT_EQ(report.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NE(report[s].find(absl::StrCat("\"grad_norm\":",
                                          absl::StrFormat("%.17g", ref.grad_norms[s]), ",")),
              std::string::npos)
        << "step " << s << ": " << report[s] << " vs " << ref.grad_norms[s];
    EXPECT_NE(report[s].find(absl::StrCat("\"grad_clipped\":", ref.clipped[s] ? "true" : "false")),
              std::string::npos)
        << "step " << s << ": " << report[s];
  }
  const std::vector<std::vector<float>> weights =
      testing::CheckpointWeights(spec, dir + "/ckpt", kSteps, planned->schedule.num_stages);
  ASSERT_EQ(weights.size(), ref.weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    ASSERT_EQ(weights[i].size(), ref.weights[i].size()) << "parameter " << i;
    EXPECT_EQ(
        std::memcmp(weights[i].data(), ref.weights[i].data(), weights[i].size() * sizeof(float)), 0)
        << "parameter " << i << " differs from the reference's";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, WorkerProcessesTest,
    ::testing::Values(Case{"1f1b", 2, 4}, Case{"1f1b", 4, 8}, Case{"gpipe", 2, 4},
                      Case{"interleaved-1f1b", 2, 4}, Case{"interleaved-1f1b", 4, 8},
                      Case{"zb-h1", 2, 4}, Case{"zb-h1", 4, 8}, Case{"zb-h2", 4, 8},
                      Case{"zb-v", 2, 4}, Case{"zb-v", 4, 8}, Case{"v-half", 2, 4},
                      Case{"v-half", 4, 8}, Case{"v-min", 4, 8}, Case{"v-zb", 4, 8},
                      Case{"dualpipev", 2, 4}, Case{"dualpipev", 4, 8},
                      Case{"interleaved-zb", 2, 4}, Case{"interleaved-zb", 4, 8},
                      Case{"1f1b", 2, 4, true}, Case{"zb-h1", 4, 8, true},
                      Case{"v-half", 4, 8, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string n = absl::StrCat(info.param.schedule, "_p", info.param.p,
                                   info.param.bf16 ? "_bf16" : "");
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

TEST(WorkerProcesses, LostPeerFailsNeighbourPromptly) {
  v1::JobSpec spec = testing::SmallJob("1f1b", 2, 4, kSteps);
  spec.mutable_training()->set_steps(100000);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string dir = testing::TempDir();
  const std::string plan_path = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  std::vector<testing::Process> workers;
  for (int r = 0; r < 2; ++r) {
    workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank",
                                      std::to_string(r), "--recv-timeout", "30"},
                                     absl::StrCat(dir, "/rank", r)));
  }
  ASSERT_TRUE(testing::WaitForText(workers[1].stdout_path, "step 2 ", absl::Seconds(60)))
      << testing::ReadFile(workers[1].stderr_path);
  const absl::Time killed = absl::Now();
  testing::Kill(workers[1], SIGKILL);
  auto code = testing::WaitFor(workers[0], absl::Seconds(20));
  ASSERT_TRUE(code.has_value()) << "rank 0 hung after its peer died";
  EXPECT_EQ(*code, 1);
  EXPECT_LT(absl::Now() - killed, absl::Seconds(5));  // EOF on the socket, not the 30 s timeout
  const std::string err = testing::ReadFile(workers[0].stderr_path);
  EXPECT_NE(err.find("lost rank 1"), std::string::npos) << err;
  testing::WaitFor(workers[1], absl::Seconds(5));
}

// Rank 1's port is held by another process when the job starts (bound and listening, never
// answering): rank 1 fails at once naming the address it cannot bind, and rank 0 does not take
// the holder for its peer: it fails at its connect timeout naming what it found there.
TEST(WorkerProcesses, APortHeldByAnotherProcessFailsBothRanksNamingIt) {
  const v1::JobSpec spec = testing::SmallJob("1f1b", 2, 4, kSteps);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(holder, 8), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string held = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));

  const std::string dir = testing::TempDir();
  planner::PlanFileOptions options;
  options.job_id = absl::StrCat("held-port-", ::getpid());
  options.addresses = {absl::StrCat("127.0.0.1:", testing::FreePort()), held};
  auto json = planner::PlanFileJson(spec, planned->plan, options);
  ASSERT_TRUE(json.ok()) << json.status();
  const std::string plan_path = dir + "/plan.json";
  std::ofstream(plan_path) << *json;
  std::vector<testing::Process> workers;
  for (int r = 0; r < 2; ++r) {
    workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank",
                                      std::to_string(r), "--connect-timeout", "3"},
                                     absl::StrCat(dir, "/rank", r)));
  }
  for (int r = 0; r < 2; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(60));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung";
    EXPECT_EQ(*code, 1) << "rank " << r;
  }
  const std::string err1 = testing::ReadFile(workers[1].stderr_path);
  EXPECT_NE(err1.find("bind/listen " + held), std::string::npos) << err1;
  const std::string err0 = testing::ReadFile(workers[0].stderr_path);
  EXPECT_NE(err0.find("could not reach rank 1 at " + held +
                      " within the connect timeout: the "
                      "process listening there did not answer as rank 1 of this job"),
            std::string::npos)
      << err0;
  ::close(holder);
}

// The product's own path, as a user takes it: `pipetrain plan --job` writes the plan file and
// `pipetrain-worker --plan` runs it, with the reference trainer's losses and the predicted
// peaks.
TEST(WorkerProcesses, RunsThePlanFileTheCliWrites) {
  const v1::JobSpec spec = testing::SmallJob("zb-v", 2, 4, kSteps);
  const std::string dir = testing::TempDir();
  const std::string job_path = dir + "/job.json";
  std::ofstream(job_path) << *schedule::ToJson(spec);
  const std::string plan_path = dir + "/job.plan";
  const std::string addresses = absl::StrCat("127.0.0.1:", testing::FreePort(), ",127.0.0.1:",
                                             testing::FreePort());
  testing::Process cli = testing::Spawn(
      {PIPETRAIN_CLIENT_BIN, "plan", "--job", job_path, "--addresses", addresses, "--job-id",
       absl::StrCat("cli-", ::getpid()), "-o", plan_path},
      dir + "/cli");
  auto cli_code = testing::WaitFor(cli, absl::Seconds(60));
  ASSERT_TRUE(cli_code.has_value() && *cli_code == 0) << testing::ReadFile(cli.stderr_path);
  EXPECT_NE(testing::ReadFile(cli.stdout_path).find("wrote plan-file to " + plan_path),
            std::string::npos)
      << testing::ReadFile(cli.stdout_path);
  // --trace-dir names a folder that does not exist yet: the worker makes it.
  const std::string trace_dir = dir + "/traces/run";
  std::vector<testing::Process> workers;
  for (int r = 0; r < 2; ++r) {
    workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank",
                                      std::to_string(r), "--connect-timeout", "20",
                                      "--recv-timeout", "30", "--trace-dir", trace_dir},
                                     absl::StrCat(dir, "/rank", r)));
  }
  for (int r = 0; r < 2; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(120));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung";
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
    for (int s = 0; s < kSteps; ++s) {
      const std::string trace =
          testing::ReadFile(absl::StrFormat("%s/step-%d.rank-%d.trace.json", trace_dir, s, r));
      EXPECT_NE(trace.find("\"ph\""), std::string::npos) << "step " << s << " rank " << r;
    }
  }
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::vector<double> reference = testing::ReferenceLosses(spec);
  // zb-v on 2 workers: the head (last stage) is on worker 0, which reports the loss.
  const std::map<int, worker::StepLine> steps =
      worker::ParseStepLines(testing::ReadFile(workers[0].stdout_path));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(steps.at(s).loss, &loss)) << steps.at(s).loss;
    EXPECT_EQ(loss, reference[s]) << "step " << s;
    EXPECT_EQ(steps.at(s).peak_activation_bytes, std::llround(planned->sim.peak_memory[0]));
  }
}

// Evaluation in real worker processes: the plan file carries the job's validation plan, each
// rank runs it after steps 2 and 4 (eval.interval_steps 2), and the loss-holding rank's
// validation losses are bitwise the reference trainer's on the held-out addition problems.
TEST(WorkerProcesses, ValidationLossEqualsTheReferenceBitwise) {
  for (const auto& [schedule, p] : {std::pair<std::string, int>{"1f1b", 2}, {"zb-v", 2}}) {
    const std::string dir = testing::TempDir();
    v1::JobSpec spec = testing::SmallJob(schedule, p, 4, kSteps);
    spec.mutable_eval()->set_interval_steps(2);
    spec.mutable_eval()->set_batches(3);
    auto planned = planner::PlanJob(spec);
    ASSERT_TRUE(planned.ok()) << planned.status();
    ASSERT_TRUE(planned->plan.has_evaluation());
    const std::string plan_path = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
    std::vector<testing::Process> workers;
    for (int r = 0; r < p; ++r) {
      workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank",
                                        std::to_string(r), "--connect-timeout", "20",
                                        "--recv-timeout", "30"},
                                       absl::StrCat(dir, "/rank", r)));
    }
    for (int r = 0; r < p; ++r) {
      auto code = testing::WaitFor(workers[r], absl::Seconds(120));
      ASSERT_TRUE(code.has_value()) << schedule << " rank " << r << " hung";
      ASSERT_EQ(*code, 0) << schedule << " rank " << r << ": "
                          << testing::ReadFile(workers[r].stderr_path);
    }
    const testing::ReferenceRun ref = testing::RunReference(spec);
    ASSERT_EQ(ref.validation.size(), 2u);
    const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
    for (int r = 0; r < p; ++r) {
      const std::map<int, worker::StepLine> steps =
          worker::ParseStepLines(testing::ReadFile(workers[r].stdout_path));
      ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps)) << schedule << " rank " << r;
      for (int s = 0; s < kSteps; ++s) {
        const std::string& printed = steps.at(s).val_loss;
        if ((s + 1) % 2 != 0) {
          EXPECT_EQ(printed, "") << schedule << " step " << s << ": no pass due";
        } else if (r != loss_rank) {
          EXPECT_EQ(printed, "null") << schedule << " rank " << r;
        } else {
          double loss = 0;
          ASSERT_TRUE(absl::SimpleAtod(printed, &loss)) << printed;
          EXPECT_EQ(loss, ref.validation.at(s + 1)) << schedule << " after step " << s + 1;
          // The training losses are untouched by the passes.
          double train = 0;
          ASSERT_TRUE(absl::SimpleAtod(steps.at(s).loss, &train));
          EXPECT_EQ(train, ref.losses[s]) << schedule << " step " << s;
        }
      }
    }
    EXPECT_NE(ref.validation.at(2), ref.validation.at(4));
  }
}

// The "tokens" source end to end: `pipetrain data prepare` tokenizes the docs, and two worker
// processes (the first stage's reads the inputs, the last stage's the targets) train on the
// directory exactly like the reference trainer reading the same files.
TEST(WorkerProcesses, TokenDatasetTrainsExactlyLikeTheReference) {
  const std::string dir = testing::TempDir();
  const testing::TokenCorpus corpus = testing::PrepareDocsCorpus(PIPETRAIN_CLIENT_BIN, dir, 512);
  const v1::JobSpec spec = testing::WithTokens(testing::SmallJob("1f1b", 2, 4, kSteps),
                                               corpus.dir, corpus.vocab_size, "uint16", 16);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string plan_path = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  std::vector<testing::Process> workers;
  for (int r = 0; r < 2; ++r) {
    workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank",
                                      std::to_string(r), "--connect-timeout", "20",
                                      "--recv-timeout", "30"},
                                     absl::StrCat(dir, "/rank", r)));
  }
  for (int r = 0; r < 2; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(120));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung";
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
  }
  const std::vector<double> reference = testing::ReferenceLosses(spec);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kSteps));
  const std::map<int, worker::StepLine> steps =
      worker::ParseStepLines(testing::ReadFile(workers[1].stdout_path));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(steps.at(s).loss, &loss)) << steps.at(s).loss;
    EXPECT_EQ(loss, reference[s]) << "step " << s;
  }
  // A fresh model on 512 ids starts near ln(512) and learns.
  EXPECT_NEAR(reference.front(), std::log(512.0), 0.5);
  EXPECT_LT(reference.back(), reference.front());
}

// --device in the real binary: on a host without a usable GPU (every CI machine), auto computes
// on the CPU and says why, an explicit cuda exits 1 with the reason, a malformed value exits 2
// naming the allowed ones.
TEST(WorkerProcesses, DeviceFlagOnAHostWithoutAGpu) {
  if (worker::SystemDeviceList()->CudaDevices().ok()) {
    GTEST_SKIP() << "this host has a usable CUDA device; scripts/gpu_check.sh covers it";
  }
  const v1::JobSpec spec = testing::SmallJob("1f1b", 1, 2, 2);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string dir = testing::TempDir();
  const std::string plan_path = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  auto run = [&](const std::string& device, const std::string& name) {
    testing::Process p = testing::Spawn(
        {PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank", "0", "--device", device},
        dir + "/" + name);
    std::optional<int> code = testing::WaitFor(p, absl::Seconds(60));
    return std::make_pair(code.value_or(-1), testing::ReadFile(p.stderr_path));
  };
  auto [auto_code, auto_err] = run("auto", "auto");
  EXPECT_EQ(auto_code, 0) << auto_err;
  EXPECT_NE(auto_err.find("--device auto: computing on the CPU: "), std::string::npos)
      << auto_err;
  EXPECT_NE(auto_err.find("computing on cpu"), std::string::npos) << auto_err;
  auto [cuda_code, cuda_err] = run("cuda", "cuda");
  EXPECT_EQ(cuda_code, 1) << cuda_err;
  EXPECT_NE(cuda_err.find("--device cuda: no usable CUDA device: "), std::string::npos)
      << cuda_err;
  auto [bad_code, bad_err] = run("gpu0", "bad");
  EXPECT_EQ(bad_code, 2) << bad_err;
  EXPECT_NE(bad_err.find("allowed: auto, cpu, cuda, cuda:N"), std::string::npos) << bad_err;
}

}  // namespace
}  // namespace pipetrain
