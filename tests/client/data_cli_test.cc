// `pipetrain data prepare` as a user runs it: the pipetrain CLI hands `data ...` to the
// pipetrain-data binary. Bad flags exit 2 naming the flag and its allowed values; a good run
// writes the directory and prints job-file lines that, pasted into a job file, give a spec that
// validates and plans with the corpus's vocabulary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "client/job_file.h"
#include "common/subprocess.h"
#include "model/job_model.h"
#include "planner/job_spec_validation.h"
#include "planner/planner.h"

namespace pipetrain {
namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun Pipetrain(const std::vector<std::string>& args, const std::string& log_prefix) {
  std::vector<std::string> argv = {PIPETRAIN_CLIENT_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  const subprocess::Process p = subprocess::Spawn(argv, log_prefix);
  const std::optional<int> code = subprocess::WaitFor(p, absl::Seconds(120));
  CliRun run;
  run.code = code.value_or(-1);
  run.out = subprocess::ReadFile(p.stdout_path);
  run.err = subprocess::ReadFile(p.stderr_path);
  return run;
}

std::string DocsCorpus(const std::string& dir) {
  const std::string path = dir + "/docs.txt";
  std::ofstream out(path, std::ios::binary);
  for (const char* doc : {"ARCHITECTURE.md", "SCHEDULES.md", "fault_tolerance.md"}) {
    std::ifstream in(std::string(PIPETRAIN_SOURCE_DIR) + "/docs/" + doc, std::ios::binary);
    out << in.rdbuf();
  }
  return path;
}

TEST(DataCliTest, BadFlagsExitTwoNamingTheFlag) {
  const std::string dir = subprocess::TempDir();
  const std::string corpus = DocsCorpus(dir);
  const struct {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"data", "prepare", "--input", corpus, "--output", dir + "/o"}, "--vocab-size"},
      {{"data", "prepare", "--input", corpus, "--output", dir + "/o", "--vocab-size", "12"},
       "--vocab-size: 12 is not allowed; allowed: 260..4194304"},
      {{"data", "prepare", "--input", corpus, "--output", dir + "/o", "--vocab-size", "500",
        "--model-type", "char"},
       "--model-type: \"char\" is not allowed; allowed: bpe, unigram"},
      {{"data", "prepare", "--input", corpus, "--output", dir + "/o", "--vocab-size", "500",
        "--val-fraction", "-1"},
       "--val-fraction: -1 is not allowed; allowed: 0..0.5"},
      {{"data", "prepare", "--input", dir + "/missing.txt", "--output", dir + "/o", "--vocab-size",
        "500"},
       "--input: " + dir + "/missing.txt: no such file"},
      {{"data", "prepare", "--input", "/dev/zero", "--output", dir + "/o", "--vocab-size", "500"},
       "--input: /dev/zero: is a character device, not a regular file"},
      {{"data", "frobnicate"}, "unknown subcommand \"frobnicate\"; allowed: prepare"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const CliRun run = Pipetrain(c.args, dir + "/bad" + std::to_string(i++));
    EXPECT_EQ(run.code, 2) << c.says << "\n" << run.err;
    EXPECT_NE(run.err.find(c.says), std::string::npos) << "want \"" << c.says << "\":\n" << run.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/o/meta.json"));
  const CliRun help = Pipetrain({"data", "prepare", "--help"}, dir + "/help");
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("--vocab-size"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--val-fraction"), std::string::npos) << help.out;
  const CliRun top = Pipetrain({"--help"}, dir + "/top");
  EXPECT_NE(top.out.find("data"), std::string::npos) << top.out;
  // The exit codes scripts rely on are in the help, not only in code comments.
  EXPECT_NE(top.out.find("Exit codes: 0 success; 1 runtime failure"), std::string::npos)
      << top.out;
}

TEST(DataCliTest, PrintsJobFileLinesThatMakeAValidJob) {
  const std::string dir = subprocess::TempDir();
  const CliRun run = Pipetrain({"data", "prepare", "--input", DocsCorpus(dir), "--vocab-size",
                                "700", "--output", dir + "/tokens", "--val-fraction", "0.02"},
                               dir + "/prepare");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir + "/tokens: train.bin "), std::string::npos) << run.out;
  for (const char* file : {"train.bin", "val.bin", "tokenizer.model", "meta.json"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/tokens/" + file)) << file;
  }
  // Everything from the snippet's first line on is YAML; add a model and a batch to it.
  const size_t at = run.out.find("model:\n");
  ASSERT_NE(at, std::string::npos) << run.out;
  const std::string job = run.out.substr(at) +
                          "  # (the test's additions)\n"
                          "parallelism: {num_workers: 2, schedule: 1f1b}\n";
  absl::StatusOr<v1::JobSpec> spec = client::ParseJobSpec(job, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << job;
  spec->mutable_model()->set_num_layers(4);
  spec->mutable_model()->set_hidden(32);
  spec->mutable_model()->set_num_heads(4);
  spec->mutable_training()->set_steps(2);
  spec->mutable_training()->set_global_batch(8);
  spec->mutable_training()->set_microbatch_size(2);
  EXPECT_EQ(spec->model().vocab_size(), 700);
  EXPECT_EQ(spec->training().data().source(), "tokens");
  EXPECT_EQ(spec->training().data().path(), dir + "/tokens");
  EXPECT_EQ(spec->training().data().token_dtype(), "uint16");
  ASSERT_TRUE(planner::ValidateJobSpec(*spec).ok()) << planner::ValidateJobSpec(*spec);
  absl::StatusOr<model::GptConfig> config = model::ModelConfig(*spec);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab, 700);
  EXPECT_EQ(config->seq_len, 256);  // the proto's default for tokens
  EXPECT_TRUE(planner::PlanJob(*spec).ok());
}

}  // namespace
}  // namespace pipetrain
