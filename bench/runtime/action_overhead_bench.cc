// The CPU cost terms the analytic model lacks, measured on this machine's CPU runtime for the
// default job (client/default_job.h), one OpenBLAS thread as a worker has:
//
// 1. The fixed per-action overhead (planner/action_overhead.h): the profiling step's own timing
//    (worker/runtime/stage_profiler.h) of F, B and W of every stage at each microbatch size, the
//    best of --rounds rounds per (stage, action), averaged over the stages, then fitted per
//    action kind as time = overhead + size x per-sample (least squares over the sizes).
// 2. The CPU rate of a stage's gradient sum across replicas (schedule/step_cpu_work.h, the
//    planner's gradient_sum_bytes_per_s): copying the stage's summed gradients out (StageGradients) and installing the
//    complete sum (ResumeStageGradients), per parameter byte; the fastest of --rounds.
// 3. The CPU rate of the step's end (the optimizer step: the gradient norm and AdamW over every
//    held stage, EndStep) per parameter byte (optimizer_bytes_per_s); the fastest of --rounds
//    (at least 5).
// The figures go into planner/action_overhead.h and planner/planner.h by hand, with the load
// average of the run (docs/data_parallel.md has the runs).
//
// Usage: action_overhead_bench [--stages 8] [--sizes 1,2,4,8,16] [--repeats 7] [--rounds 3]
// (--stages 8: the default job's V-Half split, one block per stage; 4: a 1-chunk schedule's).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/default_job.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/cost_model.h"
#include "model/job_model.h"
#include "planner/action_overhead.h"
#include "worker/runtime/job_config.h"
#include "worker/runtime/model_stage_runner.h"
#include "worker/runtime/stage_profiler.h"

using namespace pipetrain;

namespace {

double Since(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "action_overhead_bench: %s\n", status.ToString().c_str());
  return 1;
}

struct Runner {
  std::unique_ptr<kernels::CpuBackend> backend;
  std::unique_ptr<worker::JobData> data;
  std::unique_ptr<worker::ModelStageRunner> runner;
};

absl::StatusOr<Runner> MakeRunner(const v1::JobSpec& spec, const model::GptConfig& config,
                                  int stages) {
  Runner r;
  r.backend = std::make_unique<kernels::CpuBackend>();
  auto data = worker::OpenJobData(spec);
  if (!data.ok()) return data.status();
  r.data = std::make_unique<worker::JobData>(*std::move(data));
  worker::ModelStageConfig mc;
  mc.model = config;
  mc.chunk.seed = spec.training().seed();
  auto optimizer = worker::OptimizerSettingsOf(spec);
  if (!optimizer.ok()) return optimizer.status();
  mc.optimizer = *optimizer;
  mc.num_stages = stages;
  mc.num_microbatches = 1;
  for (int s = 0; s < stages; ++s) mc.stages.push_back(s);
  const data::Dataset* dataset = r.data->train.get();
  const int mbs = spec.training().microbatch_size();
  mc.data = [dataset, mbs](int step, int mb) -> absl::StatusOr<worker::MicrobatchData> {
    data::Microbatch batch = worker::TrainingMicrobatch(*dataset, step, mb, mbs);
    return worker::MicrobatchData{std::move(batch.tokens), std::move(batch.targets)};
  };
  auto runner = worker::ModelStageRunner::Create(r.backend.get(), mc);
  if (!runner.ok()) return runner.status();
  r.runner = *std::move(runner);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int stages = 8, repeats = 7, rounds = 3;
  std::vector<int> sizes = {1, 2, 4, 8, 16};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--stages") {
      stages = std::atoi(value.c_str());
    } else if (flag == "--repeats") {
      repeats = std::atoi(value.c_str());
    } else if (flag == "--rounds") {
      rounds = std::atoi(value.c_str());
    } else if (flag == "--sizes") {
      sizes.clear();
      for (absl::string_view s : absl::StrSplit(value, ',')) {
        int v = 0;
        if (!absl::SimpleAtoi(s, &v) || v < 1) {
          std::fprintf(stderr, "--sizes: bad size \"%s\"\n", std::string(s).c_str());
          return 2;
        }
        sizes.push_back(v);
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (stages < 1 || repeats < 1 || rounds < 1) {
    std::fprintf(stderr, "--stages, --repeats and --rounds must be >= 1\n");
    return 2;
  }
  const v1::JobSpec base = model::WithDefaults(client::DefaultJobSpec());
  auto config = model::ModelConfig(base);
  if (!config.ok()) return Fail(config.status());
  if (config->num_layers < stages) {
    std::fprintf(stderr, "--stages %d: the default job has %d layers\n", stages,
                 config->num_layers);
    return 2;
  }
  auto split = model::SplitEvenly(*config, stages);
  if (!split.ok()) return Fail(split.status());

  std::printf("default job: %d layers, hidden %d, seq_len %d, %d stages; best of %d rounds of "
              "the profiling step (%d repeats)\n",
              config->num_layers, config->hidden, config->seq_len, stages, rounds, repeats);
  std::printf("%-5s %12s %12s %12s   %14s %14s %14s\n", "size", "F us", "B us", "W us",
              "F GFLOP/s", "B GFLOP/s", "W GFLOP/s");
  std::vector<planner::SizedActionTimes> points;
  for (int size : sizes) {
    v1::JobSpec spec = base;
    spec.mutable_training()->set_microbatch_size(size);
    auto r = MakeRunner(spec, *config, stages);
    if (!r.ok()) return Fail(r.status());
    worker::ProfileShape shape;
    shape.num_stages = stages;
    shape.rows = int64_t{size} * config->seq_len;
    shape.hidden = config->hidden;
    shape.repeats = repeats;
    std::vector<int> all(stages);
    for (int s = 0; s < stages; ++s) all[s] = s;
    constexpr double kInf = std::numeric_limits<double>::infinity();
    std::vector<double> f(stages, kInf), b(stages, kInf), w(stages, kInf);
    for (int round = 0; round < rounds; ++round) {
      auto profile = worker::ProfileStages(*r->runner, all, shape);
      if (!profile.ok()) return Fail(profile.status());
      for (const worker::StageProfile& p : *profile) {
        f[p.stage] = std::min(f[p.stage], p.forward_s);
        b[p.stage] = std::min(b[p.stage], p.backward_input_s);
        w[p.stage] = std::min(w[p.stage], p.backward_weight_s);
      }
    }
    planner::SizedActionTimes point;
    point.microbatch_size = size;
    double ff = 0, fb = 0, fw = 0;
    for (int s = 0; s < stages; ++s) {
      point.forward_s += f[s] / stages;
      point.backward_input_s += b[s] / stages;
      point.backward_weight_s += w[s] / stages;
      const model::ChunkCost c = model::EstimateChunkCost(*config, (*split)[s], size);
      ff += c.forward_flops / stages;
      fb += c.backward_input_flops / stages;
      fw += c.backward_weight_flops / stages;
    }
    points.push_back(point);
    std::printf("%-5d %12.1f %12.1f %12.1f   %14.2f %14.2f %14.2f\n", size,
                1e6 * point.forward_s, 1e6 * point.backward_input_s,
                1e6 * point.backward_weight_s, ff / point.forward_s / 1e9,
                fb / point.backward_input_s / 1e9, fw / point.backward_weight_s / 1e9);
  }
  if (sizes.size() >= 2) {
    auto fit = planner::FitActionTimes(points);
    if (!fit.ok()) return Fail(fit.status());
    const int largest = *std::max_element(sizes.begin(), sizes.end());
    std::printf("\nfit per action (mean stage): time = overhead + size x per-sample\n");
    const struct {
      const char* name;
      planner::LinearActionTime line;
    } kinds[] = {{"F", fit->forward}, {"B", fit->backward_input}, {"W", fit->backward_weight}};
    for (const auto& k : kinds) {
      std::printf("  %s: overhead %.1f us, per sample %.2f us (overhead = %.0f%% of size 1, "
                  "%.0f%% of size %d)\n",
                  k.name, 1e6 * k.line.overhead_s, 1e6 * k.line.per_sample_s,
                  100 * k.line.overhead_s / k.line.At(1), 100 * k.line.overhead_s /
                  k.line.At(largest), largest);
    }
  }

  // Gradient sums and the optimizer step, at the job's own microbatch size.
  auto r = MakeRunner(base, *config, stages);
  if (!r.ok()) return Fail(r.status());
  worker::ProfileShape shape;
  shape.num_stages = stages;
  shape.rows = int64_t{base.training().microbatch_size()} * config->seq_len;
  shape.hidden = config->hidden;
  shape.repeats = 1;
  std::vector<int> all(stages);
  for (int s = 0; s < stages; ++s) all[s] = s;
  double best_sum = std::numeric_limits<double>::infinity(), best_step = best_sum;
  double bytes = 0;
  for (int s = 0; s < stages; ++s) {
    bytes += model::EstimateChunkCost(*config, (*split)[s], 1).parameter_bytes;
  }
  for (int round = 0; round < std::max(rounds, 5); ++round) {
    // Every stage's F, B and W of one microbatch: its gradients are the step's.
    auto profile = worker::ProfileStages(*r->runner, all, shape);
    if (!profile.ok()) return Fail(profile.status());
    auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < stages; ++s) {
      auto sum = r->runner->StageGradients(s);
      if (!sum.ok()) return Fail(sum.status());
      if (absl::Status st = r->runner->ResumeStageGradients(s, *sum, 1); !st.ok()) return Fail(st);
    }
    best_sum = std::min(best_sum, Since(start));
    start = std::chrono::steady_clock::now();
    auto norm = r->runner->SumGradientSquares();
    if (!norm.ok()) return Fail(norm.status());
    std::optional<worker::GradientNormPart> part;
    if (*norm) {
      double running = 0;
      for (int s = stages - 1; s >= 0; --s) {
        auto next = r->runner->AddGradientSquares(s, running);
        if (!next.ok()) return Fail(next.status());
        running = *next;
      }
      part = worker::GradientNormPart{running, true};
    }
    auto end = r->runner->EndStep(part);
    if (!end.ok()) return Fail(end.status());
    best_step = std::min(best_step, Since(start));
  }
  std::printf("\nparameters of the %d stages: %.0f bytes (f32)\n", stages, bytes);
  std::printf("gradient sum (copy out + install, every stage): %.1f us, %.2f GB/s of parameter "
              "bytes\n",
              1e6 * best_sum, bytes / best_sum / 1e9);
  std::printf("optimizer step (norm + AdamW, every stage): %.1f us, %.2f GB/s of parameter "
              "bytes\n",
              1e6 * best_step, bytes / best_step / 1e9);
  return 0;
}
