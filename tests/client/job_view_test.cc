// The `pipetrain status` summary: what a person reads about a job's plan, checkpoints and
// recoveries, predicted next to measured.
#include "client/job_view.h"

#include "schedule/codec/plan_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pipetrain::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Job RunningJob() {
  v1::Job job;
  job.set_id("job-000007");
  job.mutable_spec()->set_name("tiny");
  job.mutable_spec()->mutable_training()->set_steps(20);
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_steps_done(12);
  job.set_last_loss(1.25);
  job.add_losses(2.5);
  v1::Plan* plan = job.mutable_plan();
  plan->set_schedule("v-half");
  plan->set_num_stages(4);
  plan->set_num_microbatches(8);
  plan->set_costs_measured(true);
  plan->add_workers();
  plan->add_workers();
  plan->mutable_prediction()->add_peak_activation_bytes(2 * 1048576);
  plan->mutable_prediction()->add_peak_activation_bytes(1048576);
  job.add_measured_peak_activation_bytes(2 * 1048576);
  return job;
}

TEST(JobViewTest, StatusShowsThePlanAndPredictedNextToMeasuredMemory) {
  const std::string out = FormatJobStatus(RunningJob());
  EXPECT_THAT(out, HasSubstr("job-000007  tiny  RUNNING  step 12/20\n"));
  EXPECT_THAT(out, HasSubstr("plan: v-half on 2 workers x 2 chunks, 8 microbatches; costs "
                             "measured (profiling step)\n"));
  EXPECT_THAT(out, HasSubstr("loss 1.2500 (first 2.5000)"));
  EXPECT_THAT(out, HasSubstr("rank 0: 2.000 / 2.000\n"));
  EXPECT_THAT(out, HasSubstr("rank 1: 1.000 / -\n"));
  EXPECT_THAT(out, Not(HasSubstr("checkpoints:")));
  EXPECT_THAT(out, Not(HasSubstr("recoveries:")));
  EXPECT_THAT(out, Not(HasSubstr("shared core")));
  EXPECT_THAT(out, Not(HasSubstr("transport:")));  // no workers assigned yet
}

TEST(JobViewTest, StatusSaysHowTheTensorsMove) {
  v1::Job job = RunningJob();
  job.set_transport(v1::TRANSPORT_KIND_TCP);
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("  transport: TCP\n"));
  job.mutable_spec()->mutable_compute()->set_device(v1::DEVICE_KIND_CUDA);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("  transport: TCP, device tensors staged through host memory\n"));
  job.set_transport(v1::TRANSPORT_KIND_NCCL);
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("  transport: NCCL, a GPU per rank\n"));
  job.mutable_spec()->mutable_parallelism()->set_data_parallel(2);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("  transport: NCCL, a GPU per rank; a communicator per replica's "
                        "pipeline and per stage group\n"));
}

TEST(JobViewTest, StatusShowsCheckpointsAndTheNewestRecoveries) {
  v1::Job job = RunningJob();
  v1::CheckpointSpec* ckpt = job.mutable_spec()->mutable_checkpoint();
  ckpt->set_dir("/ckpt");
  ckpt->set_interval_steps(5);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("checkpoints: every 5 steps in /ckpt; newest complete: none yet\n"));

  job.set_checkpoint_step(10);
  job.mutable_spec()->set_max_restarts(0);  // 0 means the default budget, 3
  job.set_restarts(3);
  for (int i = 0; i < 4; ++i) {
    v1::JobRecovery* r = job.add_recoveries();
    r->set_resume_step(5 * i);
    r->set_reason(i == 3 ? "coordinator restarted" : "lost a worker: w" + std::to_string(i));
    r->set_counted(i < 3);
  }
  const std::string out = FormatJobStatus(job);
  EXPECT_THAT(out, HasSubstr("newest complete: step 10\n"));
  EXPECT_THAT(out, HasSubstr("recoveries: 4 (restarts 3 of 3)\n"));
  EXPECT_THAT(out, Not(HasSubstr("w0")));  // only the newest three are listed
  EXPECT_THAT(out, HasSubstr("    resumed from step 5: lost a worker: w1\n"));
  EXPECT_THAT(out, HasSubstr("    resumed from step 15 (not counted): coordinator restarted\n"));

  job.mutable_spec()->set_max_restarts(-1);  // negative: no restarts
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("recoveries: 4 (restarts 3 of 0)\n"));
}

TEST(JobViewTest, StepTimeIsTheSharedCoreSimulationWhenWorkersShareCores) {
  v1::Job job = RunningJob();
  job.mutable_plan()->mutable_prediction()->set_makespan_s(0.0708);
  job.set_last_step_s(0.1367);
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("step time        0.0708 s    0.1367 s\n"));
  job.mutable_plan()->mutable_prediction()->set_shared_cpu_step_s(0.131);
  job.mutable_plan()->mutable_prediction()->set_shared_cpu_note("4 CPU workers share 2 cores");
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("step time        0.1310 s    0.1367 s\n"
                                              "    (4 CPU workers share 2 cores)\n"));
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("waits for a shared core"));
}

// The training recipe in `status`: the model's shape and parameter count, the learning rate of
// the next step, and the steps whose update was skipped for non-finite gradients.
TEST(JobViewTest, StatusShowsTheModelTheLearningRateAndSkippedUpdates) {
  v1::Job job = RunningJob();
  EXPECT_THAT(FormatJobStatus(job), Not(HasSubstr("model:")));  // no shape in this spec
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("  lr: constant from 0.003; next t=13: 0.003\n"));
  EXPECT_THAT(FormatJobStatus(job), Not(HasSubstr("skipped")));

  v1::JobSpec* spec = job.mutable_spec();
  spec->mutable_model()->set_preset("gpt2-small");
  spec->mutable_training()->mutable_data()->set_source("text");
  v1::OptimizerSpec* o = spec->mutable_training()->mutable_optimizer();
  o->set_learning_rate(1e-3);
  o->set_lr_schedule("cosine");
  o->set_warmup_steps(2);
  o->set_min_lr_ratio(0.1);
  for (int step : {3, 5, 6, 7, 8, 11}) job.add_skipped_steps(step);
  const std::string out = FormatJobStatus(job);
  EXPECT_THAT(out, HasSubstr("  model: gpt2-small, 12 layers x 768 hidden, 12 heads, ffn 3072, "
                             "seq 1024, vocab 50257; 163,037,184 parameters (163.0M)\n"));
  // Step 13 of 20 with 2 warmup steps: progress 11/18 of the cosine from 1e-3 to 1e-4.
  EXPECT_THAT(out, HasSubstr("  lr: cosine from 0.001, warmup 2, floor 0.1 x peak at step 20; "
                             "next t=13: 0.0003961\n"));
  EXPECT_THAT(out, HasSubstr("  skipped updates (non-finite gradients): 6 step(s), newest: "
                             "5, 6, 7, 8, 11\n"));
  job.set_steps_done(20);
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("  lr: cosine from 0.001, warmup 2, floor 0.1 x "
                                              "peak at step 20\n"));
  // Tied embeddings: one 50257 x 768 matrix less, GPT-2's published 124M.
  spec->mutable_model()->set_tie_embeddings(true);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("vocab 50257, tied embeddings; 124,439,808 parameters (124.4M)\n"));
}

// The gradient norm of the last step, and how many steps clipping scaled down.
TEST(JobViewTest, StatusShowsTheGradientNormAndTheClippedSteps) {
  v1::Job job = RunningJob();
  EXPECT_THAT(FormatJobStatus(job), Not(HasSubstr("gradient norm")));  // no report yet
  job.add_grad_norms(3.5);
  job.add_grad_norms(0.8125);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("  gradient norm: 0.8125 (last step); no clipping\n"));
  job.mutable_spec()->mutable_training()->mutable_optimizer()->set_clip_grad_norm(1.0);
  job.add_clipped_steps(0);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("  gradient norm: 0.8125 (last step); clipped at 1: 1 of 2 steps\n"));
}

}  // namespace
}  // namespace pipetrain::client

// Evaluation and the numbers users compare, in `pipetrain status` and the watch line.
namespace pipetrain::client {
namespace {

TEST(JobViewTest, StatusShowsValidationAndThroughput) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_eval()->set_interval_steps(5);
  job.mutable_spec()->mutable_eval()->set_batches(8);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("  validation: every 5 steps on 8 microbatches; none yet\n"));
  v1::EvalResult* first = job.add_evaluations();
  first->set_step(5);
  first->set_loss(2.0);
  first->set_perplexity(7.38905609893065);
  v1::EvalResult* last = job.add_evaluations();
  last->set_step(10);
  last->set_loss(1.5);
  last->set_perplexity(4.4816890703380645);
  job.set_timed_steps(12);
  job.set_tokens_per_s(1280);
  job.set_mean_tokens_per_s(1000);
  job.set_model_flops_per_step(3e9);
  job.set_model_flops_per_s(2.5e9);
  job.set_mean_model_flops_per_s(2e9);
  job.set_peak_flops_per_s(10e9);
  job.set_peak_flops_source("2 worker(s): cpu: 1 core(s) x 5.00 GFLOP/s measured sgemm");
  job.set_mfu(0.25);
  job.set_mean_mfu(0.2);
  job.set_learning_rate(0.0025);
  const std::string out = FormatJobStatus(job);
  EXPECT_THAT(out, HasSubstr("  validation loss 1.5000, perplexity 4.48 at step 10 (first 2.0000 "
                             "at step 5; 2 pass(es), every 5 steps on 8 microbatches)\n"));
  EXPECT_THAT(out, HasSubstr("  last step / whole job: 1280 / 1000 tokens/s, 2.500 / 2.000 model "
                             "GFLOP/s (3 GFLOP per step)\n"));
  EXPECT_THAT(out, HasSubstr("  MFU 25.00% / 20.00% of 10 GFLOP/s peak (2 worker(s): cpu: 1 "
                             "core(s) x 5.00 GFLOP/s measured sgemm)\n"));
  EXPECT_THAT(out, HasSubstr("  learning rate of the last step 0.0025\n"));
  EXPECT_THAT(FormatProgress(job), HasSubstr("  val 1.5000 (ppl 4.48 @10)"));
  EXPECT_THAT(FormatProgress(job), HasSubstr("  MFU 25.0%"));

  // A tiny model on two GPUs: the peak in TFLOP/s, a millionth-scale MFU with two significant
  // digits instead of 0.00%.
  job.set_peak_flops_per_s(1.979e15);
  job.set_peak_flops_source("2 worker(s): NVIDIA H200: published dense bf16 peak 989.4 TFLOP/s");
  job.set_mfu(1.2121e-5);
  job.set_mean_mfu(9.2e-6);
  EXPECT_THAT(FormatJobStatus(job), HasSubstr("  MFU 0.0012% / 0.00092% of 1979 TFLOP/s peak"));
  EXPECT_THAT(FormatProgress(job), HasSubstr("  MFU 0.0012%"));

  job.set_peak_flops_per_s(0);
  job.set_mfu(0);
  job.set_peak_flops_source("unknown: no published dense bf16 peak for device \"X\"");
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("  MFU unknown (unknown: no published dense bf16 peak for device \"X\")\n"));
  EXPECT_THAT(FormatProgress(job), Not(HasSubstr("MFU")));
}

// `pipetrain status --json` prints the Job as protobuf JSON (job_commands.cc): these are the
// names scripts read.
TEST(JobViewTest, JsonCarriesValidationAndThroughputFields) {
  v1::Job job = RunningJob();
  v1::EvalResult* eval = job.add_evaluations();
  eval->set_step(10);
  eval->set_loss(1.5);
  eval->set_perplexity(4.5);
  job.set_tokens_per_s(1280);
  job.set_model_flops_per_s(2.5e9);
  job.set_mfu(0.25);
  job.set_peak_flops_per_s(1e10);
  job.set_learning_rate(0.0025);
  job.add_skipped_steps(3);
  job.set_mean_mfu(0.2);
  absl::StatusOr<std::string> json = schedule::ToJson(job);
  ASSERT_TRUE(json.ok()) << json.status();
  for (const char* field :
       {"\"evaluations\": [", "\"step\": 10", "\"loss\": 1.5", "\"perplexity\": 4.5",
        "\"tokens_per_s\": 1280", "\"model_flops_per_s\": 2500000000", "\"mfu\": 0.25",
        "\"peak_flops_per_s\": 10000000000", "\"learning_rate\": 0.0025",
        "\"skipped_steps\": [", "\"mean_mfu\": 0.2"}) {
    EXPECT_THAT(*json, HasSubstr(field));
  }
}

TEST(JobViewTest, NoValidationOrThroughputLinesWithoutThem) {
  const std::string out = FormatJobStatus(RunningJob());
  EXPECT_THAT(out, Not(HasSubstr("validation")));
  EXPECT_THAT(out, Not(HasSubstr("MFU")));
}

}  // namespace
}  // namespace pipetrain::client
