// pipetrain-train-reference: trains the GPT model single-process (the reference trainer) on the
// embedded addition task or a text file, printing loss and accuracy per step.
#include <cstdio>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "kernels/cpu/cpu_backend.h"
#include "model/job_model.h"
#include "model/lr_schedule.h"
#include "worker/data/addition_task.h"
#include "worker/data/text_dataset.h"
#include "worker/model/reference_trainer.h"

int main(int argc, char** argv) {
  CLI::App app{"pipetrain reference trainer (single process, CPU)"};
  int steps = 600, layers = 2, hidden = 64, heads = 4, ffn = 256, digits = 2, seq_len = 64;
  int microbatches = 4, microbatch_size = 16, blas_threads = 1, eval_every = 50;
  // AdamW as a job gets it by default (model/job_model.h), with weight decay 0.01.
  const pipetrain::v1::OptimizerSpec defaults =
      pipetrain::model::WithDefaults(pipetrain::v1::JobSpec()).training().optimizer();
  float lr = static_cast<float>(defaults.learning_rate()), weight_decay = 0.01f;
  uint64_t seed = 1234;
  std::string text, lr_schedule = "constant";
  int warmup_steps = 0;
  double min_lr_ratio = 0;
  app.add_option("--steps", steps, "optimizer steps");
  app.add_option("--layers", layers, "transformer blocks");
  app.add_option("--hidden", hidden, "hidden size");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--ffn", ffn, "MLP inner size");
  app.add_option("--digits", digits, "addition task: digits per operand");
  app.add_option("--text", text, "train byte-level on this text file instead of addition");
  app.add_option("--seq-len", seq_len, "sequence length for --text");
  app.add_option("--microbatches", microbatches, "microbatches per step");
  app.add_option("--microbatch-size", microbatch_size, "sequences per microbatch");
  app.add_option("--lr", lr, "AdamW learning rate");
  app.add_option("--weight-decay", weight_decay, "AdamW weight decay (linear weights)");
  app.add_option("--lr-schedule", lr_schedule, "constant or cosine (over --steps)");
  app.add_option("--warmup-steps", warmup_steps, "linear warmup steps");
  app.add_option("--min-lr-ratio", min_lr_ratio, "cosine floor as a fraction of --lr");
  app.add_option("--seed", seed, "seed for initialisation and data");
  app.add_option("--blas-threads", blas_threads, "OpenBLAS threads");
  app.add_option("--eval-every", eval_every, "held-out evaluation every N steps (0 = never)");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<pipetrain::data::Dataset> dataset;
  if (text.empty()) {
    if (digits < 1 || digits > 9) {
      std::fprintf(stderr, "--digits must be in [1, 9]\n");
      return 2;
    }
    dataset = std::make_unique<pipetrain::data::AdditionTask>(digits, seed);
  } else {
    auto ds = pipetrain::data::TextDataset::Open(text, seq_len, seed);
    if (!ds.ok()) {
      std::fprintf(stderr, "%s\n", ds.status().ToString().c_str());
      return 2;
    }
    dataset = *std::move(ds);
  }
  pipetrain::kernels::CpuBackend backend({.blas_threads = blas_threads});
  pipetrain::model::ReferenceTrainerConfig config;
  config.model = {layers, hidden, heads, ffn, dataset->seq_len(), dataset->vocab_size()};
  config.num_microbatches = microbatches;
  config.microbatch_size = microbatch_size;
  config.optimizer.adamw = {.lr = lr,
                            .beta1 = static_cast<float>(defaults.beta1()),
                            .beta2 = static_cast<float>(defaults.beta2()),
                            .eps = static_cast<float>(defaults.epsilon()),
                            .weight_decay = weight_decay};
  // The schedule as a job with these settings gets it (model/lr_schedule.h).
  pipetrain::v1::JobSpec schedule_spec;
  schedule_spec.mutable_training()->set_steps(steps);
  schedule_spec.mutable_training()->mutable_optimizer()->set_lr_schedule(lr_schedule);
  schedule_spec.mutable_training()->mutable_optimizer()->set_warmup_steps(warmup_steps);
  schedule_spec.mutable_training()->mutable_optimizer()->set_min_lr_ratio(min_lr_ratio);
  auto schedule = pipetrain::model::LrScheduleOf(schedule_spec);
  if (!schedule.ok()) {
    std::fprintf(stderr, "%s\n", schedule.status().ToString().c_str());
    return 2;
  }
  config.optimizer.lr_schedule = *schedule;
  config.seed = seed;
  auto trainer = pipetrain::model::ReferenceTrainer::Create(&backend, dataset.get(), config);
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", trainer.status().ToString().c_str());
    return 2;
  }
  std::printf("dataset %s, %s, %d x %d sequences per step\n", dataset->name().c_str(),
              config.model.DebugString().c_str(), microbatches, microbatch_size);
  for (int s = 0; s < steps; ++s) {
    auto st = (*trainer)->Step();
    if (!st.ok()) {
      std::fprintf(stderr, "step failed: %s\n", st.status().ToString().c_str());
      return 1;
    }
    std::printf("step %5lld  loss %.4f  token_acc %.3f  exact %.3f  grad_norm %.4g  %.1f ms%s\n",
                static_cast<long long>(st->step), st->loss, st->token_accuracy, st->exact_match,
                st->grad_norm, st->seconds * 1e3,
                st->update_skipped ? "  (non-finite gradients: no update)" : "");
    if (eval_every > 0 && st->step % eval_every == 0) {
      auto ev = (*trainer)->Evaluate(4);
      if (ev.ok()) {
        std::printf("eval  %5lld  loss %.4f  token_acc %.3f  exact %.3f\n",
                    static_cast<long long>(ev->step), ev->loss, ev->token_accuracy,
                    ev->exact_match);
      }
    }
    std::fflush(stdout);
  }
  return 0;
}
