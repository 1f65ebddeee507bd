// Real worker processes over TCP on loopback: for every schedule, p = 2 and 4 pipetrain-worker
// processes train the default task from a plan file and report, step by step, exactly the
// reference trainer's losses (bitwise: printed with 17 significant digits) and the planner's
// predicted peak activation bytes. A worker killed mid-run makes its neighbour fail the step
// with a clear error within a bounded time.
#include <signal.h>

#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "pipetrain/v1/worker.pb.h"
#include "planner/planner.h"
#include "schedule/codec/plan_proto.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/process_util.h"

namespace pipetrain {
namespace {

constexpr int kSteps = 4;

// Writes the plan file and returns its path.
std::string WritePlanFile(const v1::JobSpec& spec, const v1::Plan& plan, const std::string& dir) {
  v1::PrepareRequest request;
  request.set_job_id("e2e");
  *request.mutable_spec() = spec;
  *request.mutable_plan() = plan;
  for (int r = 0; r < plan.workers_size(); ++r) {
    v1::Peer* peer = request.add_peers();
    peer->set_rank(r);
    peer->set_address(absl::StrCat("127.0.0.1:", testing::FreePort()));
  }
  const std::string path = dir + "/plan.json";
  std::ofstream(path) << *schedule::ToJson(request);
  return path;
}

// Parses "rank R step S loss L ... peak_activation_bytes B ..." lines.
struct StepLine {
  std::string loss;
  int64_t peak = 0;
};
std::map<int, StepLine> ParseSteps(const std::string& out) {
  std::map<int, StepLine> steps;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() < 10 || f[0] != "rank") continue;
    int step = 0;
    if (!absl::SimpleAtoi(f[3], &step)) continue;
    steps[step].loss = f[5];
    absl::SimpleAtoi(f[9], &steps[step].peak);
  }
  return steps;
}

struct Case {
  std::string schedule;
  int p;
  int m;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.schedule << " p=" << c.p; }

class WorkerProcessesTest : public ::testing::TestWithParam<Case> {};

TEST_P(WorkerProcessesTest, TrainsExactlyLikeTheReference) {
  const Case& c = GetParam();
  const v1::JobSpec spec = testing::SmallJob(c.schedule, c.p, c.m, kSteps);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string dir = testing::TempDir();
  const std::string plan_path = WritePlanFile(spec, planned->plan, dir);
  std::vector<testing::Process> workers;
  for (int r = 0; r < c.p; ++r) {
    workers.push_back(testing::Spawn(
        {PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank", std::to_string(r),
         "--connect-timeout", "20", "--recv-timeout", "30"},
        absl::StrCat(dir, "/rank", r)));
  }
  for (int r = 0; r < c.p; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(120));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung";
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
  }
  const std::vector<double> reference = testing::ReferenceLosses(spec);
  const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
  for (int r = 0; r < c.p; ++r) {
    auto steps = ParseSteps(testing::ReadFile(workers[r].stdout_path));
    ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps)) << "rank " << r;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(steps[s].peak, std::llround(planned->sim.peak_memory[r]))
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
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, WorkerProcessesTest,
    ::testing::Values(Case{"1f1b", 2, 4}, Case{"1f1b", 4, 8}, Case{"gpipe", 2, 4},
                      Case{"interleaved-1f1b", 2, 4}, Case{"interleaved-1f1b", 4, 8},
                      Case{"zb-h1", 2, 4}, Case{"zb-h1", 4, 8}, Case{"zb-h2", 4, 8},
                      Case{"zb-v", 2, 4}, Case{"zb-v", 4, 8}, Case{"v-half", 2, 4},
                      Case{"v-half", 4, 8}, Case{"v-min", 4, 8}, Case{"v-zb", 4, 8}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string n = absl::StrCat(info.param.schedule, "_p", info.param.p);
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
  const std::string plan_path = WritePlanFile(spec, planned->plan, dir);
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

}  // namespace
}  // namespace pipetrain
