// The model-level pieces of evaluation and of the throughput metrics: the eval fields' defaults
// and validation, the validation plan the planner makes, the analytic FLOP count per step, and
// the peaks MFU is measured against.
#include <gtest/gtest.h>

#include <string>

#include "model/cost_model.h"
#include "model/device_peaks.h"
#include "model/job_model.h"
#include "planner/job_spec_validation.h"
#include "planner/planner.h"
#include "schedule/codec/plan_proto.h"
#include "schedule/forward_only.h"

namespace pipetrain::model {
namespace {

v1::JobSpec Spec(const std::string& schedule, int workers) {
  v1::JobSpec spec;
  spec.mutable_model()->set_num_layers(8);
  spec.mutable_model()->set_hidden(32);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_training()->set_steps(10);
  spec.mutable_training()->set_global_batch(8);
  spec.mutable_training()->set_microbatch_size(2);
  spec.mutable_parallelism()->set_num_workers(workers);
  spec.mutable_parallelism()->set_schedule(schedule);
  spec.mutable_parallelism()->set_analytic_costs(true);
  return spec;
}

void ExpectInvalid(const v1::JobSpec& spec, const std::string& words) {
  const absl::Status s = planner::ValidateJobSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(words), std::string::npos) << s;
}

TEST(EvalSpecTest, DefaultsAndBadValues) {
  const v1::JobSpec defaulted = WithDefaults(Spec("1f1b", 2));
  EXPECT_EQ(defaulted.eval().interval_steps(), 0);  // off
  EXPECT_EQ(defaulted.eval().batches(), 8);
  v1::JobSpec spec = Spec("1f1b", 2);
  spec.mutable_eval()->set_interval_steps(-1);
  ExpectInvalid(spec, "eval.interval_steps: -1 is not allowed; allowed: 0..");
  spec.mutable_eval()->set_interval_steps(5);
  spec.mutable_eval()->set_batches(-2);
  ExpectInvalid(spec, "eval.batches: -2 is not allowed; allowed: 0..4096");
  spec.mutable_eval()->set_batches(4097);
  ExpectInvalid(spec, "eval.batches: 4097 is not allowed; allowed: 0..4096");
  spec.mutable_eval()->set_batches(3);
  EXPECT_TRUE(planner::ValidateJobSpec(spec).ok());
}

// The validation plan: forward-only on the training placement, eval.batches microbatches,
// validated and simulated; none without evaluation.
TEST(EvaluationPlanTest, PlannedWithTheJobOnItsPlacement) {
  for (const auto& [schedule, p] : {std::pair<std::string, int>{"1f1b", 4}, {"interleaved-1f1b", 2},
                                   {"zb-h1", 2}, {"v-zb", 2}}) {
    v1::JobSpec spec = Spec(schedule, p);
    EXPECT_FALSE(planner::PlanJob(spec).value().plan.has_evaluation()) << schedule;
    spec.mutable_eval()->set_interval_steps(5);
    spec.mutable_eval()->set_batches(3);
    const planner::PlannedJob planned = planner::PlanJob(spec).value();
    ASSERT_TRUE(planned.plan.has_evaluation()) << schedule;
    const v1::Plan& eval = planned.plan.evaluation();
    EXPECT_TRUE(eval.forward_only());
    EXPECT_EQ(eval.schedule(), schedule::kForwardOnlyName);
    EXPECT_EQ(eval.num_microbatches(), 3);
    EXPECT_EQ(eval.num_stages(), planned.plan.num_stages());
    EXPECT_EQ(eval.stage_to_worker().size(), planned.plan.stage_to_worker().size());
    for (int s = 0; s < eval.stage_to_worker_size(); ++s) {
      EXPECT_EQ(eval.stage_to_worker(s), planned.plan.stage_to_worker(s)) << schedule;
      EXPECT_EQ(eval.stage_first_layer(s), planned.plan.stage_first_layer(s));
      EXPECT_EQ(eval.stage_num_layers(s), planned.plan.stage_num_layers(s));
      EXPECT_EQ(eval.costs(s).forward_s(), planned.plan.costs(s).forward_s());
      EXPECT_EQ(eval.costs(s).activation_bytes(), 0);
    }
    EXPECT_GT(eval.prediction().makespan_s(), 0);
    for (int64_t peak : eval.prediction().peak_activation_bytes()) EXPECT_EQ(peak, 0);
    // A pass of 3 forward microbatches is shorter than a training step of 4 with backward.
    EXPECT_LT(eval.prediction().makespan_s(), planned.plan.prediction().makespan_s()) << schedule;
    // What a worker does with it: the codec rebuilds and validates a forward-only schedule.
    absl::StatusOr<schedule::Schedule> decoded = schedule::ScheduleFromProto(eval);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_TRUE(decoded->forward_only);
  }
}

// TrainingStepFlops, against the formula in docs/training.md: per token
// 6 * (L * (4 H^2 + 2 H F) + H V) + 12 * L * T * H.
TEST(ModelFlopsTest, PerStepCountIsTheDocumentedFormula) {
  GptConfig c;
  c.num_layers = 2;
  c.hidden = 8;
  c.heads = 2;
  c.ffn = 32;
  c.seq_len = 4;
  c.vocab = 10;
  // B = 3 sequences per microbatch, m = 2 microbatches: 24 tokens.
  const double per_token = 6.0 * (2 * (4 * 64 + 2 * 8 * 32) + 8 * 10) + 12.0 * 2 * 4 * 8;
  EXPECT_EQ(per_token, 10464);
  EXPECT_EQ(TrainingStepFlops(c, 3, 2), 24 * per_token);
  EXPECT_EQ(TrainingStepFlops(c, 3, 2), 251136);

  v1::JobSpec spec = Spec("1f1b", 2);  // default task: seq 8, vocab 12; 4 microbatches of 2
  const GptConfig job = ModelConfig(spec).value();
  EXPECT_EQ(ModelFlopsPerStep(spec), TrainingStepFlops(job, 2, 4));
}

TEST(DevicePeaksTest, PublishedDensePeaksByName) {
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA H100 80GB HBM3", v1::PRECISION_BF16), 989.4e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA H100 80GB HBM3", v1::PRECISION_FP32), 67e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA H100 PCIe", v1::PRECISION_BF16), 756e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA H100 NVL", v1::PRECISION_BF16), 835e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA H200", v1::PRECISION_BF16), 989.4e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA A100-SXM4-80GB", v1::PRECISION_BF16), 312e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA A100 80GB PCIe", v1::PRECISION_FP32), 19.5e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA L4", v1::PRECISION_BF16), 121e12);
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA L40S", v1::PRECISION_BF16), 362.05e12);  // not the L4's
  EXPECT_EQ(GpuDensePeakFlops("NVIDIA A10", v1::PRECISION_BF16), 125e12);      // not the A100's
  EXPECT_EQ(GpuDensePeakFlops("nvidia h100 80gb hbm3", v1::PRECISION_UNSPECIFIED), 67e12);
  // Unknown devices, and precisions a device lacks, are unknown rather than guessed.
  EXPECT_FALSE(GpuDensePeakFlops("NVIDIA GeForce RTX 4090", v1::PRECISION_BF16).has_value());
  EXPECT_FALSE(GpuDensePeakFlops("Tesla T4", v1::PRECISION_BF16).has_value());
  EXPECT_FALSE(GpuDensePeakFlops("", v1::PRECISION_FP32).has_value());
}

TEST(DevicePeaksTest, WorkerAndJobPeaks) {
  WorkerPeakInput cpu{v1::DEVICE_KIND_CPU, "", 40e9, /*cpu_cores=*/2, /*compute_threads=*/4};
  PeakFlops w = WorkerPeakFlops(cpu, v1::PRECISION_FP32);
  EXPECT_EQ(w.flops_per_s, 80e9);  // 4 BLAS threads on 2 usable cores: 2 cores
  EXPECT_NE(w.source.find("2 core(s) x 40.00 GFLOP/s"), std::string::npos) << w.source;
  cpu.cpu_cores = 0;  // unknown core count: the threads
  EXPECT_EQ(WorkerPeakFlops(cpu, v1::PRECISION_FP32).flops_per_s, 160e9);
  cpu.compute_threads = 0;  // 0 means 1
  EXPECT_EQ(WorkerPeakFlops(cpu, v1::PRECISION_FP32).flops_per_s, 40e9);
  // A CPU computes bf16 as f32 GEMMs on rounded inputs: the same peak.
  EXPECT_EQ(WorkerPeakFlops(cpu, v1::PRECISION_BF16).flops_per_s, 40e9);
  WorkerPeakInput unmeasured{v1::DEVICE_KIND_CPU, "", 0, 8, 1};
  EXPECT_NE(WorkerPeakFlops(unmeasured, v1::PRECISION_FP32).source.find("unknown"),
            std::string::npos);
  WorkerPeakInput gpu{v1::DEVICE_KIND_CUDA, "NVIDIA H100 80GB HBM3", 0, 0, 0};
  WorkerPeakInput unknown_gpu{v1::DEVICE_KIND_CUDA, "Some Accelerator 9000", 0, 0, 0};
  EXPECT_EQ(JobPeakFlops({gpu, gpu}, v1::PRECISION_BF16).flops_per_s, 2 * 989.4e12);
  const PeakFlops mixed = JobPeakFlops({gpu, unknown_gpu}, v1::PRECISION_BF16);
  EXPECT_EQ(mixed.flops_per_s, 0);
  EXPECT_NE(mixed.source.find("rank 1: unknown"), std::string::npos) << mixed.source;
  EXPECT_NE(mixed.source.find("Some Accelerator 9000"), std::string::npos) << mixed.source;
  WorkerPeakInput emulated{v1::DEVICE_KIND_EMULATED, "", 0, 0, 0};
  EXPECT_EQ(JobPeakFlops({emulated}, v1::PRECISION_FP32).flops_per_s, 0);
}

}  // namespace
}  // namespace pipetrain::model
