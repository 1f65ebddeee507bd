#include "worker/runtime/stage_profiler.h"

#include <algorithm>
#include <chrono>

#include "common/status_macros.h"

namespace pipetrain::worker {
namespace {

double Seconds(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

}  // namespace

double TypicalSeconds(std::vector<double> repeats) {
  if (repeats.empty()) return 0.0;
  const double fastest = *std::min_element(repeats.begin(), repeats.end());
  if (repeats.size() >= 3) repeats.erase(repeats.begin());  // the cold one
  std::sort(repeats.begin(), repeats.end());
  const size_t n = repeats.size();
  const double median =
      n % 2 == 1 ? repeats[n / 2] : 0.5 * (repeats[n / 2 - 1] + repeats[n / 2]);
  return std::min(median, 1.25 * fastest);
}

absl::StatusOr<std::vector<StageProfile>> ProfileStages(StageRunner& runner,
                                                        const std::vector<int>& stages,
                                                        const ProfileShape& shape) {
  if (shape.repeats < 1) return absl::InvalidArgumentError("profile repeats must be >= 1");
  kernels::Backend& backend = runner.backend();
  std::vector<StageProfile> profiles;
  for (int stage : stages) {
    std::vector<double> f, b, w;
    for (int rep = 0; rep < shape.repeats; ++rep) {
      // Each repeat is a fresh "step" so microbatch 0 may run again on the stage.
      PT_RETURN_IF_ERROR(runner.BeginStep(shape.step));
      kernels::Tensor input;
      if (stage > 0) {
        PT_ASSIGN_OR_RETURN(input, backend.Empty({shape.rows, shape.hidden}, "profile input"));
        PT_RETURN_IF_ERROR(backend.Fill(0.0f, &input));
      }
      PT_RETURN_IF_ERROR(backend.Synchronize());
      auto start = std::chrono::steady_clock::now();
      PT_ASSIGN_OR_RETURN(kernels::Tensor out, runner.Forward(stage, 0, std::move(input)));
      PT_RETURN_IF_ERROR(backend.Synchronize());
      f.push_back(Seconds(start));
      // The output's shape is the output gradient's shape; the last stage's loss is local.
      if (stage < shape.num_stages - 1) PT_RETURN_IF_ERROR(backend.Fill(0.0f, &out));
      start = std::chrono::steady_clock::now();
      PT_ASSIGN_OR_RETURN(kernels::Tensor grad, runner.BackwardInput(stage, 0, std::move(out)));
      PT_RETURN_IF_ERROR(backend.Synchronize());
      b.push_back(Seconds(start));
      grad.Reset();
      start = std::chrono::steady_clock::now();
      PT_RETURN_IF_ERROR(runner.BackwardWeight(stage, 0));
      PT_RETURN_IF_ERROR(backend.Synchronize());
      w.push_back(Seconds(start));
    }
    profiles.push_back(
        StageProfile{stage, TypicalSeconds(f), TypicalSeconds(b), TypicalSeconds(w)});
  }
  runner.ResetActivationPeak();
  return profiles;
}

}  // namespace pipetrain::worker
