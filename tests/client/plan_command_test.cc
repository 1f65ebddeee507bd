// `pipetrain plan --from-csv`: a schedule in PyTorch pipelining's CSV format is validated,
// simulated with the cost flags and rendered like a generated one; bad files and flag mixes are
// refused naming the flag.
#include "client/plan_command.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pipetrain::client {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "/plan_command_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PlanCommandTest, CsvScheduleSimulatesLikeTheGeneratedOne) {
  PlanOptions generate;
  generate.schedule = "zb-h1";
  generate.workers = 3;
  generate.microbatches = 6;
  generate.costs = "1,1.5,0.5";
  generate.format = "csv";
  absl::StatusOr<PlanOutput> generated = RunPlan(generate);
  ASSERT_TRUE(generated.ok()) << generated.status();

  PlanOptions from_csv;
  from_csv.csv_path = TempFile("zb-h1.csv", generated->document);
  from_csv.costs = "1,1.5,0.5";
  from_csv.format = "csv";
  absl::StatusOr<PlanOutput> imported = RunPlan(from_csv);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->document, generated->document);  // the CSV round-trips
  // The same actions with the same costs: the same simulated summary, but for the name (the
  // file's stem instead of the generator's).
  std::string summary = imported->summary;
  const std::string stem = "plan_command_" + std::to_string(::getpid()) + "_zb-h1";
  ASSERT_NE(summary.find(stem), std::string::npos) << summary;
  summary.replace(summary.find(stem), stem.size(), "zb-h1");
  EXPECT_EQ(summary, generated->summary);
}

TEST(PlanCommandTest, BadCsvInputsNameTheFlag) {
  PlanOptions o;
  o.csv_path = "/nonexistent/schedule.csv";
  EXPECT_EQ(RunPlan(o).status().message(), "--from-csv: cannot read /nonexistent/schedule.csv");
  // A backward before its forward: parsed, but not a valid schedule.
  o.csv_path = TempFile("bad.csv", "0B0,0F0\n");
  absl::StatusOr<PlanOutput> invalid = RunPlan(o);
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(invalid.status().message().find("not a valid schedule"), std::string::npos)
      << invalid.status();
  o.csv_path = TempFile("garbage.csv", "hello,world\n");
  EXPECT_NE(RunPlan(o).status().message().find("--from-csv " + o.csv_path + ": "),
            std::string::npos);
  o.workers = 2;
  EXPECT_NE(RunPlan(o).status().message().find("come from the --from-csv file"),
            std::string::npos);
  o.workers = -1;
  o.job_path = "job.yaml";
  EXPECT_EQ(RunPlan(o).status().message(), "--job and --from-csv exclude each other");
}

// The job spec's bounds hold for the flags: an absurd size is refused naming the flag and the
// allowed range (-m 100000000 used to plan for 23 s in 9.8 GB).
TEST(PlanCommandTest, SizesBeyondTheJobSpecBoundsAreRefused) {
  PlanOptions o;
  o.workers = 4;
  o.microbatches = 100000000;
  EXPECT_EQ(RunPlan(o).status().message(), "--microbatches must be in 1..65536 (got 100000000)");
  o.microbatches = 8;
  o.workers = 4097;
  EXPECT_EQ(RunPlan(o).status().message(), "--workers must be in 1..4096 (got 4097)");
  o.workers = 4;
  o.chunks = 65;
  EXPECT_EQ(RunPlan(o).status().message(),
            "--chunks must be in 1..64, or 0 for the schedule's default (got 65)");
  o.chunks = 0;
  o.microbatches = 65536;  // the bound itself plans
  o.schedule = "1f1b";
  o.format = "json";
  EXPECT_TRUE(RunPlan(o).ok());
}

// `plan --job` with --device: a GPU job's analytic costs at the preset's sustained rate (h100:
// 440 TFLOP/s) instead of a CPU core's 30 GFLOP/s, so the predicted step shrinks by about that
// ratio; an unknown preset is refused naming the flag.
TEST(PlanCommandTest, JobWithADevicePresetPlansAtItsRate) {
  PlanOptions o;
  o.job_path = TempFile("gpu_job.json",
                        R"({"name": "g", "model": {"num_layers": 8, "hidden": 256, "num_heads": 4},
                            "training": {"steps": 10, "global_batch": 64,
                                         "microbatch_size": 16},
                            "parallelism": {"num_workers": 2, "schedule": "1f1b",
                                            "analytic_costs": true},
                            "compute": {"device": "DEVICE_KIND_CUDA"}})");
  o.format = "ascii";
  absl::StatusOr<PlanOutput> cpu_rate = RunPlan(o);
  ASSERT_TRUE(cpu_rate.ok()) << cpu_rate.status();
  EXPECT_NE(cpu_rate->summary.find("30 GFLOP/s per worker assumed"), std::string::npos)
      << cpu_rate->summary;
  o.device = "h100";
  absl::StatusOr<PlanOutput> gpu_rate = RunPlan(o);
  ASSERT_TRUE(gpu_rate.ok()) << gpu_rate.status();
  EXPECT_NE(gpu_rate->summary.find("440000 GFLOP/s per worker assumed"), std::string::npos)
      << gpu_rate->summary;
  o.device = "tpu";
  EXPECT_EQ(RunPlan(o).status().message().rfind("--device: ", 0), 0u)
      << RunPlan(o).status();
}

}  // namespace
}  // namespace pipetrain::client
