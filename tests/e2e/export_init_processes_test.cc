// Standard checkpoints out and in with real worker processes (docs/export.md): a p = 2 1F1B run
// checkpoints its last step; `pipetrain export`'s gathering writes it as one safetensors file;
// a p = 4 V-Half job of the same model (another split: 8 stages instead of 2, another seed and
// data order) starts from it with model.init_from, and every step's loss, the first included,
// is bitwise the loss of the single-process reference trainer started from the same file. The
// imported weights are trained ones (the first loss is far below a random start's) and the
// run keeps training from them. A file of another model fails Prepare naming the tensor. A
// "tokens" job's export carries its SentencePiece tokenizer, and `pipetrain generate` (the
// CLI, through pipetrain-generate and pipetrain-data) continues a prompt with it, the same way
// every time; bad flags exit 2 naming the flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/model_export.h"
#include "planner/planner.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/plan_files.h"
#include "tests/e2e/process_util.h"
#include "tests/e2e/token_corpus.h"
#include "model/safetensors.h"
#include "worker/service/step_line.h"

namespace pipetrain {
namespace {

// Runs `spec` as real worker processes from a plan file; returns the loss rank's step losses
// (empty after a test failure). `stderr_out`, if given, receives rank 0's stderr and the run is
// expected to fail.
std::vector<double> RunWorkers(const v1::JobSpec& spec, const std::string& dir,
                               int* num_stages = nullptr, std::string* stderr_out = nullptr) {
  auto planned = planner::PlanJob(spec);
  EXPECT_TRUE(planned.ok()) << planned.status();
  if (!planned.ok()) return {};
  if (num_stages != nullptr) *num_stages = planned->schedule.num_stages;
  const int p = spec.parallelism().num_workers();
  const std::string plan = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  std::vector<testing::Process> workers;
  for (int r = 0; r < p; ++r) {
    workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan, "--rank",
                                      std::to_string(r), "--connect-timeout", "20",
                                      "--recv-timeout", "30"},
                                     absl::StrCat(dir, "/rank", r)));
  }
  for (int r = 0; r < p; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(90));
    EXPECT_TRUE(code.has_value()) << "rank " << r << " hung";
    if (stderr_out == nullptr) {
      EXPECT_EQ(code.value_or(-1), 0) << testing::ReadFile(workers[r].stderr_path);
    } else if (r == 0) {
      EXPECT_NE(code.value_or(0), 0);
      *stderr_out = testing::ReadFile(workers[r].stderr_path);
    }
  }
  if (stderr_out != nullptr) return {};
  const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
  std::vector<double> losses;
  const std::string out = testing::ReadFile(workers[loss_rank].stdout_path);
  for (const auto& [step, line] : worker::ParseStepLines(out)) {
    double loss = 0;
    EXPECT_TRUE(absl::SimpleAtod(line.loss, &loss)) << line.loss;
    losses.push_back(loss);
  }
  return losses;
}

TEST(ExportInitProcesses, ExportedP2RunStartsAP4VHalfRunExactlyLikeTheReference) {
  const std::string dir = testing::TempDir();
  constexpr int kStepsA = 6;
  v1::JobSpec a = testing::SmallJob("1f1b", 2, 4, kStepsA);
  a.mutable_model()->set_num_layers(8);
  a.mutable_checkpoint()->set_dir(dir + "/ckpt");
  a.mutable_checkpoint()->set_interval_steps(kStepsA);
  int stages_a = 0;
  std::filesystem::create_directories(dir + "/a");
  const std::vector<double> losses_a = RunWorkers(a, dir + "/a", &stages_a);
  ASSERT_EQ(losses_a.size(), static_cast<size_t>(kStepsA));

  client::ExportRequest request;
  request.spec = a;
  request.num_stages = stages_a;
  request.output = dir + "/model.safetensors";
  auto exported = client::ExportCheckpoint(request);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->step, kStepsA);

  constexpr int kStepsB = 3;
  v1::JobSpec b = testing::SmallJob("v-half", 4, 8, kStepsB);
  b.mutable_training()->set_seed(4242);
  b.mutable_model()->set_init_from(request.output);
  int stages_b = 0;
  std::filesystem::create_directories(dir + "/b");
  const std::vector<double> losses_b = RunWorkers(b, dir + "/b", &stages_b);
  EXPECT_EQ(stages_b, 8);
  ASSERT_EQ(losses_b.size(), static_cast<size_t>(kStepsB));
  const testing::ReferenceRun reference = testing::RunReference(b);
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kStepsB));
  for (int s = 0; s < kStepsB; ++s) {
    EXPECT_EQ(losses_b[s], reference.losses[s]) << "step " << s << " (bitwise)";
  }
  // The weights came from the file: a random start of the same job begins far higher.
  v1::JobSpec fresh = b;
  fresh.mutable_model()->clear_init_from();
  const std::vector<double> fresh_losses = testing::ReferenceLosses(fresh);
  std::printf("first-step loss: random init %.6f, run A's first %.6f, last %.6f; from the "
              "export %.6f, then %.6f, %.6f\n",
              fresh_losses[0], losses_a.front(), losses_a.back(), losses_b[0], losses_b[1],
              losses_b[2]);
  EXPECT_LT(losses_b[0], fresh_losses[0]);
  EXPECT_LT(losses_b[0], losses_a.front());
  EXPECT_LT(losses_b.back(), losses_b.front()) << "training continues from the imported weights";
}

TEST(ExportInitProcesses, InitFromAnotherModelFailsPrepareNamingTheTensor) {
  const std::string dir = testing::TempDir();
  v1::JobSpec a = testing::SmallJob("1f1b", 2, 4, 1);
  a.mutable_checkpoint()->set_dir(dir + "/ckpt");
  a.mutable_checkpoint()->set_interval_steps(1);
  int stages = 0;
  std::filesystem::create_directories(dir + "/a");
  ASSERT_EQ(RunWorkers(a, dir + "/a", &stages).size(), 1u);
  client::ExportRequest request;
  request.spec = a;
  request.num_stages = stages;
  request.output = dir + "/model.safetensors";
  ASSERT_TRUE(client::ExportCheckpoint(request).ok());

  v1::JobSpec b = testing::SmallJob("1f1b", 2, 4, 1);
  b.mutable_model()->set_hidden(64);
  b.mutable_model()->set_ffn_hidden(128);
  b.mutable_model()->set_init_from(request.output);
  std::string err;
  std::filesystem::create_directories(dir + "/b");
  RunWorkers(b, dir + "/b", nullptr, &err);
  EXPECT_NE(err.find("model.init_from: " + request.output +
                     ": tensor wte.weight has shape [12, 32], the job's model needs [12, 64]"),
            std::string::npos)
      << err;
}

// `pipetrain generate ARGS...`: exit code, stdout, stderr.
struct Cli {
  int code = -1;
  std::string out, err;
};
Cli Generate(const std::string& dir, std::vector<std::string> args) {
  static int calls = 0;
  args.insert(args.begin(), {PIPETRAIN_CLIENT_BIN, "generate"});
  const std::string log = absl::StrCat(dir, "/generate", calls++);
  testing::Process p = testing::Spawn(args, log);
  Cli cli;
  cli.code = testing::WaitFor(p, absl::Seconds(60)).value_or(-1);
  cli.out = testing::ReadFile(log + ".out");
  cli.err = testing::ReadFile(log + ".err");
  return cli;
}

TEST(ExportInitProcesses, TokensModelExportsItsTokenizerAndGenerates) {
  const std::string dir = testing::TempDir();
  const testing::TokenCorpus corpus = testing::PrepareDocsCorpus(PIPETRAIN_CLIENT_BIN, dir, 400);
  v1::JobSpec spec = testing::WithTokens(testing::SmallJob("1f1b", 2, 4, 3), corpus.dir,
                                         corpus.vocab_size, "uint16", 16);
  spec.mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec.mutable_checkpoint()->set_interval_steps(3);
  int stages = 0;
  std::filesystem::create_directories(dir + "/run");
  ASSERT_EQ(RunWorkers(spec, dir + "/run", &stages).size(), 3u);
  std::filesystem::create_directories(dir + "/out");
  client::ExportRequest request;
  request.spec = spec;
  request.num_stages = stages;
  request.output = dir + "/out/model.safetensors";
  auto exported = client::ExportCheckpoint(request);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->tokenizer_path, dir + "/out/tokenizer.model");
  EXPECT_EQ(testing::ReadFile(dir + "/out/tokenizer.model"),
            testing::ReadFile(corpus.dir + "/tokenizer.model"));
  auto file = model::SafetensorsFile::Open(request.output);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata().at("pipetrain.tokenizer"), "sentencepiece");
  EXPECT_EQ(file->metadata().at("vocab_size"), std::to_string(corpus.vocab_size));

  const std::string prompt = "The pipeline";
  const Cli first = Generate(dir, {"--weights", request.output, "--prompt", prompt,
                                   "--max-tokens", "6"});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.out.rfind(prompt, 0), 0u) << first.out;
  EXPECT_GT(first.out.size(), prompt.size() + 1) << "some text was generated: " << first.out;
  const Cli again = Generate(dir, {"--weights", request.output, "--prompt", prompt,
                                   "--max-tokens", "6"});
  EXPECT_EQ(again.out, first.out) << "greedy generation is deterministic";
  std::printf("pipetrain generate: %s", first.out.c_str());

  Cli bad = Generate(dir, {"--weights", request.output, "--prompt", prompt, "--max-tokens", "-2"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--max-tokens: -2 is not allowed"), std::string::npos) << bad.err;
  bad = Generate(dir, {"--weights", request.output, "--prompt", prompt, "--bogus"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--bogus"), std::string::npos) << bad.err;
  bad = Generate(dir, {"--prompt", prompt});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--weights"), std::string::npos) << bad.err;
  // Another tokenizer than the model's is refused.
  std::filesystem::copy_file(request.output, dir + "/model2.safetensors");
  { std::ofstream(dir + "/tokenizer.model") << "not a tokenizer"; }
  bad = Generate(dir, {"--weights", dir + "/model2.safetensors", "--prompt", prompt});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("is not the tokenizer this model was trained with"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace pipetrain
