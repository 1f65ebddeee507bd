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

}  // namespace
}  // namespace pipetrain::client
