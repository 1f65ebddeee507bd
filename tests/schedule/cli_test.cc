// Runs the built `pipetrain` binary: good plans succeed, bad input exits non-zero with one
// clear line naming the problem and what is allowed.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace {

struct CliRun {
  int code = -1;
  std::string out;  // stdout and stderr together
};

CliRun Pipetrain(const std::string& args) {
  CliRun r;
  const std::string cmd = std::string(PIPETRAIN_BIN) + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void ExpectOneLineError(const std::string& args, const std::string& what) {
  CliRun r = Pipetrain(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
}

TEST(CliTest, PlanDefaultJobPrintsPredictions) {
  CliRun r = Pipetrain("plan --schedule 1f1b --workers 4 --microbatches 8");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("makespan 33"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bubble ratio 0.272727"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("w0=4 w1=3 w2=2 w3=1"), std::string::npos) << r.out;
}

TEST(CliTest, EveryFormatWorks) {
  for (const char* fmt : {"ascii", "svg", "trace", "csv", "json"}) {
    CliRun r =
        Pipetrain(std::string("plan --schedule zb-h1 -p 3 -m 5 --costs 1,2,1 --format ") + fmt);
    EXPECT_EQ(r.code, 0) << fmt << ": " << r.out;
  }
  CliRun json = Pipetrain("plan --schedule 1f1b -p 2 -m 2 --format json");
  EXPECT_NE(json.out.find("\"peak_activation_units\""), std::string::npos);
}

TEST(CliTest, HelpStatesUnits) {
  CliRun r = Pipetrain("plan --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("WHOLE share of layers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("units of one microbatch's"), std::string::npos) << r.out;
}

TEST(CliTest, BadInputIsOneClearLine) {
  ExpectOneLineError("plan --schedule 1f1b --workers 0 --microbatches 8",
                     "--workers must be in 1..4096 (got 0)");
  ExpectOneLineError("plan --schedule 1f1b --workers 4 --microbatches 0",
                     "--microbatches must be in 1..65536 (got 0)");
  ExpectOneLineError("plan --schedule nope --workers 4 --microbatches 8",
                     "unknown schedule \"nope\"; valid: gpipe, 1f1b");
  ExpectOneLineError("plan --schedule interleaved-1f1b --workers 4 --microbatches 3",
                     "multiple of num_workers (m >= p): got m=3, p=4");
  ExpectOneLineError("plan --workers 4 --microbatches 8 --costs 1,2",
                     "--costs must be three non-negative numbers f,b,w");
  ExpectOneLineError("plan --workers 4 --microbatches 8 --costs 1,-2,1", "--costs");
  ExpectOneLineError("plan --workers 4 --microbatches 8 --format png", "--format must be one of");
  ExpectOneLineError("plan --workers 4 --microbatches 8 --format plan-file",
                     "--format plan-file needs --job FILE");
  ExpectOneLineError("plan --job /nonexistent/job.yaml", "/nonexistent/job.yaml");
  ExpectOneLineError("plan --workers four --microbatches 8", "--workers");
  ExpectOneLineError("plan --schedule 1f1b --workers 4 --microbatches 8 --chunks 2",
                     "chunks_per_worker must be 1 for 1f1b");
  ExpectOneLineError("plan --workers 4", "--microbatches is required");
  ExpectOneLineError("plan --microbatches 4", "--workers is required");
}

}  // namespace
