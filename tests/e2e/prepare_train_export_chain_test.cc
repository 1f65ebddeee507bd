// Issue 22's third "Must show" chain, as real processes, end to end:
//   1. `pipetrain data prepare` on a ~2 MB text made from the repository's docs (docs/*.md
//      repeated, then README.md once: the validation split is README's text, which training
//      never sees) trains a SentencePiece BPE tokenizer and writes the token directory;
//   2. a GPT-2-style job (the "tiny" preset, tied input/output embeddings, warmup + cosine,
//      weight decay, gradient clipping) trains on it through a local coordinator and two
//      worker processes with evaluation every 30 steps; its validation loss falls at every pass
//      and `pipetrain status` shows it;
//   3. `pipetrain export JOB` (the CLI, through the coordinator) writes the model and its
//      tokenizer;
//   4. the numpy check (tests/export/numpy_forward_check.py: the `safetensors` package and numpy
//      alone) reproduces pipetrain's loss of the exported model within 1e-4 relative on the
//      second job's first batch and on validation batches;
//   5. a second job of another schedule and seed starts from the file (model.init_from): its
//      first loss is bitwise the exported model's loss on that batch computed in this process
//      (a whole-model forward pass of the loaded file), and far below a random start;
//   6. `pipetrain generate` continues a prompt with the exported model and tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/job_client.h"
#include "client/job_commands.h"
#include "client/local_cluster.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/job_model.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/process_util.h"
#include "worker/data/dataset.h"
#include "worker/model/exported_weights.h"
#include "worker/model/gpt_chunk.h"
#include "worker/runtime/job_config.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

constexpr int kVocab = 512;
constexpr int kSeqLen = 64;
constexpr int64_t kCorpusBytes = 2 << 20;

// `pipetrain ARGS...` (with --coordinator when given): exit code, stdout, stderr.
struct Cli {
  int code = -1;
  std::string out, err;
};
Cli RunCli(const std::string& dir, std::vector<std::string> args, absl::Duration limit) {
  static int calls = 0;
  args.insert(args.begin(), PIPETRAIN_CLIENT_BIN);
  const std::string log = absl::StrCat(dir, "/cli", calls++);
  testing::Process p = testing::Spawn(args, log);
  Cli cli;
  cli.code = testing::WaitFor(p, limit).value_or(-1);
  cli.out = testing::ReadFile(log + ".out");
  cli.err = testing::ReadFile(log + ".err");
  return cli;
}

// docs/*.md (sorted) repeated until the text reaches `bytes`, then README.md once; returns the
// path and sets `tail_bytes` to README's size.
std::string WriteDocsCorpus(const std::string& dir, int64_t bytes, int64_t* tail_bytes) {
  const fs::path source(PIPETRAIN_SOURCE_DIR);
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(source / "docs")) {
    if (e.path().extension() == ".md") docs.push_back(e.path());
  }
  std::sort(docs.begin(), docs.end());
  std::string body;
  for (const fs::path& p : docs) body += testing::ReadFile(p.string());
  const std::string readme = testing::ReadFile((source / "README.md").string());
  const std::string path = dir + "/corpus.txt";
  std::ofstream out(path, std::ios::binary);
  int64_t written = 0;
  while (written < bytes) {
    out << body;
    written += static_cast<int64_t>(body.size());
  }
  out << readme;
  *tail_bytes = static_cast<int64_t>(readme.size());
  return path;
}

// The GPT-2-style job on the prepared directory.
v1::JobSpec ChainJob(const std::string& tokens, const std::string& schedule, uint64_t seed,
                     int steps) {
  v1::JobSpec spec;
  spec.set_name("chain");
  spec.mutable_model()->set_preset("tiny");
  spec.mutable_model()->set_tie_embeddings(true);
  spec.mutable_model()->set_vocab_size(kVocab);
  spec.mutable_model()->set_seq_len(kSeqLen);
  v1::TrainingSpec* t = spec.mutable_training();
  t->set_steps(steps);
  t->set_microbatch_size(4);
  t->set_global_batch(16);
  t->set_seed(seed);
  t->mutable_data()->set_source("tokens");
  t->mutable_data()->set_path(tokens);
  t->mutable_data()->set_token_dtype("uint16");
  v1::OptimizerSpec* o = t->mutable_optimizer();
  o->set_learning_rate(1e-2);
  o->set_lr_schedule("cosine");
  o->set_warmup_steps(3);
  o->set_min_lr_ratio(0.1);
  o->set_weight_decay(0.1);
  o->set_clip_grad_norm(1.0);
  spec.mutable_parallelism()->set_num_workers(2);
  spec.mutable_parallelism()->set_schedule(schedule);
  spec.mutable_parallelism()->set_analytic_costs(true);
  return spec;
}

v1::Job RunJob(client::JobClient& jobs, const v1::JobSpec& spec) {
  auto submitted = jobs.Submit(spec);
  EXPECT_TRUE(submitted.ok()) << submitted.status();
  if (!submitted.ok()) return {};
  std::ostringstream out, err;
  auto done = client::WatchJob(jobs, submitted->id(), false, out, err);
  EXPECT_TRUE(done.ok()) << done.status() << "\n" << err.str();
  if (!done.ok()) return {};
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();
  return *done;
}

// One batch of the numpy check's batches.json, with pipetrain's loss on it.
nlohmann::json Batch(const std::string& name, const data::Microbatch& mb, int batch, double loss) {
  return {{"name", name},
          {"batch", batch},
          {"tokens", mb.tokens},
          {"targets", mb.targets},
          {"loss", absl::StrFormat("%.17g", loss)}};
}

TEST(PrepareTrainExportChain, DocsToTrainedExportedCheckedAndContinuedModel) {
  const absl::Time begin = absl::Now();
  auto seconds = [&] { return absl::ToDoubleSeconds(absl::Now() - begin); };
  const std::string dir = testing::TempDir();

  // 1. data prepare.
  int64_t readme_bytes = 0;
  const std::string corpus = WriteDocsCorpus(dir, kCorpusBytes, &readme_bytes);
  const int64_t corpus_bytes = static_cast<int64_t>(fs::file_size(corpus));
  // The validation split starts at the first line start after this point: inside README.
  const double val_fraction = static_cast<double>(readme_bytes - 200) / corpus_bytes;
  const std::string tokens = dir + "/tokens";
  const Cli prepare = RunCli(dir,
                             {"data", "prepare", "--input", corpus, "--output", tokens,
                              "--vocab-size", std::to_string(kVocab), "--val-fraction",
                              absl::StrFormat("%.6f", val_fraction)},
                             absl::Seconds(120));
  ASSERT_EQ(prepare.code, 0) << prepare.err;
  const nlohmann::json meta =
      nlohmann::json::parse(testing::ReadFile(tokens + "/meta.json"), nullptr, false);
  ASSERT_FALSE(meta.is_discarded());
  EXPECT_EQ(meta["dtype"], "uint16");
  EXPECT_EQ(meta["vocab_size"], kVocab);
  EXPECT_GT(meta["val_start_byte"].get<int64_t>(), corpus_bytes - readme_bytes)
      << "the validation text is README's alone";
  const double prepared_at = seconds();
  std::printf("data prepare: %.1f MB of text -> %lld train + %lld validation ids in %.1f s\n",
              corpus_bytes / 1e6, static_cast<long long>(meta["train_tokens"].get<int64_t>()),
              static_cast<long long>(meta["val_tokens"].get<int64_t>()), prepared_at);

  // 2. Train through a local coordinator and two workers, evaluating every 10 steps.
  client::LocalClusterOptions options;
  options.workers = 2;
  options.coordinator_bin = PIPETRAIN_COORDINATOR_BIN;
  options.worker_bin = PIPETRAIN_WORKER_BIN;
  auto cluster = client::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string coordinator = (*cluster)->coordinator_address();
  client::JobClient jobs(coordinator, "");
  constexpr int kStepsA = 120;
  v1::JobSpec a = ChainJob(tokens, "zb-h1", 5, kStepsA);
  a.mutable_eval()->set_interval_steps(30);
  a.mutable_eval()->set_batches(4);
  a.mutable_checkpoint()->set_dir(dir + "/ckpt");
  a.mutable_checkpoint()->set_interval_steps(kStepsA);
  const v1::Job done_a = RunJob(jobs, a);
  ASSERT_EQ(done_a.losses_size(), kStepsA);
  ASSERT_EQ(done_a.evaluations_size(), 4);
  std::string evals;
  for (const v1::EvalResult& e : done_a.evaluations()) {
    absl::StrAppendFormat(&evals, " %.4f@%d", e.loss(), e.step());
  }
  std::printf("job A (%s, tiny preset, tied embeddings): training loss %.4f -> %.4f; validation"
              " loss%s; %zu of %d steps clipped; %.1f s\n",
              done_a.id().c_str(), done_a.losses(0), done_a.losses(kStepsA - 1), evals.c_str(),
              static_cast<size_t>(done_a.clipped_steps_size()), kStepsA, seconds() - prepared_at);
  EXPECT_LT(done_a.evaluations(0).loss(), done_a.losses(0));
  for (int i = 1; i < done_a.evaluations_size(); ++i) {
    EXPECT_LT(done_a.evaluations(i).loss(), done_a.evaluations(i - 1).loss())
        << "validation loss falls at every pass";
  }
  // The last pass is well below a uniform guess over the vocabulary.
  EXPECT_LT(done_a.evaluations(3).loss(), 0.8 * std::log(static_cast<double>(kVocab)));
  EXPECT_NEAR(done_a.evaluations(3).perplexity(), std::exp(done_a.evaluations(3).loss()), 1e-9);
  EXPECT_GT(done_a.clipped_steps_size(), 0) << "clipping acted";
  EXPECT_EQ(done_a.checkpoint_step(), kStepsA);
  // `pipetrain status` shows the newest pass.
  const v1::EvalResult& last_eval = done_a.evaluations(3);
  const Cli status =
      RunCli(dir, {"status", done_a.id(), "--coordinator", coordinator}, absl::Seconds(30));
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_NE(status.out.find(absl::StrFormat("validation loss %.4f, perplexity %.2f at step %d",
                                            last_eval.loss(), last_eval.perplexity(), kStepsA)),
            std::string::npos)
      << status.out;

  // 3. Export through the CLI.
  const std::string model = dir + "/out/model.safetensors";
  fs::create_directories(dir + "/out");
  const Cli exported = RunCli(
      dir, {"export", done_a.id(), "-o", model, "--coordinator", coordinator}, absl::Seconds(60));
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_EQ(testing::ReadFile(dir + "/out/tokenizer.model"),
            testing::ReadFile(tokens + "/tokenizer.model"));

  // 5 (first half). The second job: another schedule, seed and data order, from the file.
  constexpr int kStepsB = 4;
  v1::JobSpec b = ChainJob(tokens, "1f1b", 77, kStepsB);
  b.mutable_model()->set_init_from(model);
  // Fine-tuning's gentler rate: a constant 1e-3, no warmup.
  b.mutable_training()->mutable_optimizer()->set_learning_rate(1e-3);
  b.mutable_training()->mutable_optimizer()->set_lr_schedule("constant");
  b.mutable_training()->mutable_optimizer()->set_warmup_steps(0);
  const v1::JobSpec b_full = model::WithDefaults(b);
  auto config = model::ModelConfig(b_full);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->tie_embeddings);
  kernels::CpuBackend backend;
  auto chunk = model::GptChunk::Create(&backend, *config, model::WholeModel(*config));
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  model::GptChunk* whole = chunk->get();
  ASSERT_TRUE(model::LoadExportedWeights(model, absl::MakeSpan(&whole, 1)).ok());
  auto dataset = worker::MakeDataset(b_full);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  // The exported model's loss on job B's first batch: the mean of its microbatches' losses, in
  // microbatch order, as every pipeline rank and the reference trainer sum it.
  const int microbatches = model::NumMicrobatches(b_full);
  const int mb_size = b_full.training().microbatch_size();
  double first_batch_loss = 0;
  nlohmann::json batches = nlohmann::json::array();
  auto forward = [&](const data::Microbatch& mb) {
    model::ForwardInput in;
    in.tokens = mb.tokens;
    in.targets = mb.targets;
    auto out = whole->Forward(0, std::move(in));
    EXPECT_TRUE(out.ok()) << out.status();
    whole->Discard(0);
    return out.ok() ? out->loss : std::nan("");
  };
  for (int m = 0; m < microbatches; ++m) {
    const data::Microbatch mb = worker::TrainingMicrobatch(**dataset, /*step=*/0, m, mb_size);
    const double loss = forward(mb);
    first_batch_loss += loss / microbatches;
    batches.push_back(Batch(absl::StrCat("job B step 1, microbatch ", m), mb, mb_size, loss));
  }
  auto a_data = worker::OpenJobData(model::WithDefaults(a));
  ASSERT_TRUE(a_data.ok()) << a_data.status();
  ASSERT_NE(a_data->validation, nullptr);
  for (int i = 0; i < 2; ++i) {
    const data::Microbatch mb = data::ValidationMicrobatch(*a_data->validation, i, mb_size);
    batches.push_back(Batch(absl::StrCat("validation microbatch ", i), mb, mb_size, forward(mb)));
  }
  std::ofstream(dir + "/batches.json") << batches.dump() << "\n";

  // 4. The numpy check of the exported file.
  const Cli numpy = [&] {
    const std::string log = dir + "/numpy";
    testing::Process p =
        testing::Spawn({PIPETRAIN_TEST_PYTHON, PIPETRAIN_NUMPY_CHECK, "--model", model,
                        "--batches", dir + "/batches.json"},
                       log);
    Cli cli;
    cli.code = testing::WaitFor(p, absl::Seconds(60)).value_or(-1);
    cli.out = testing::ReadFile(log + ".out");
    cli.err = testing::ReadFile(log + ".err");
    return cli;
  }();
  ASSERT_EQ(numpy.code, 0) << PIPETRAIN_TEST_PYTHON
                           << " (scripts/setup.sh makes it, with numpy and safetensors) failed:\n"
                           << numpy.out << numpy.err;
  EXPECT_NE(numpy.out.find("OK: 6 batches within 0.0001 relative"), std::string::npos)
      << numpy.out;
  std::printf("numpy check: %s", numpy.out.substr(numpy.out.rfind("OK:")).c_str());

  // 5. Job B continues from the export.
  const v1::Job done_b = RunJob(jobs, b);
  ASSERT_EQ(done_b.losses_size(), kStepsB);
  std::printf("job B (%s, init_from): first loss %.9f, the exported model on that batch %.9f;"
              " then %.4f %.4f %.4f\n",
              done_b.id().c_str(), done_b.losses(0), first_batch_loss, done_b.losses(1),
              done_b.losses(2), done_b.losses(3));
  EXPECT_EQ(done_b.losses(0), first_batch_loss) << "bitwise";
  EXPECT_LT(done_b.losses(0), 0.8 * done_a.losses(0)) << "trained weights, not a random start";

  // 6. Sampling from the export with its tokenizer.
  const std::string prompt = "The pipeline";
  const Cli generated = RunCli(
      dir, {"generate", "--weights", model, "--prompt", prompt, "--max-tokens", "12"},
      absl::Seconds(60));
  ASSERT_EQ(generated.code, 0) << generated.err;
  EXPECT_EQ(generated.out.rfind(prompt, 0), 0u) << generated.out;
  EXPECT_GT(generated.out.size(), prompt.size() + 1) << generated.out;
  std::printf("pipetrain generate: %s", generated.out.c_str());
  std::printf("whole chain: %.1f s\n", seconds());
}

}  // namespace
}  // namespace pipetrain
