// EmulatedStageRunner: a StageRunner that does no arithmetic. Each F/B/W/BW waits for its cost
// model time, while memory is real: F allocates the stage's activation bytes on the device
// allocator, B frees the part the cost model says B frees, W frees the rest, OFFLOAD copies the
// stored bytes to host memory and frees the device copy, RELOAD brings them back. Tensors passed
// between stages have `boundary_elements` floats.
//
// OFFLOAD/RELOAD are asynchronous and real: they queue a copy on this runner's ActivationCopier
// (one copy thread, optionally bandwidth-capped) and return; the B/W/BW of a reloaded stash
// waits for the copy only if it has not finished. activation_bytes() is what the device holds:
// the resident stash plus offloaded copies not yet released; it rises at F (its start) and at
// RELOAD, and falls at B/W/BW and at the end of the compute action after an OFFLOAD (which
// waits for that copy; activation_copier.h), the simulator's memory model.
//
// EMULATED: for scale tests on a small machine (p = 8 workers on 2 cores). Never the default;
// losses it reports are absent (it has no model).
//
// Thread-safety: not thread-safe (one executor thread).
#ifndef PIPETRAIN_WORKER_RUNTIME_EMULATED_STAGE_RUNNER_H_
#define PIPETRAIN_WORKER_RUNTIME_EMULATED_STAGE_RUNNER_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "schedule/cost_model.h"
#include "worker/runtime/activation_copier.h"
#include "worker/runtime/offload_table.h"
#include "worker/runtime/stage_runner.h"

namespace pipetrain::worker {

struct EmulatedStageConfig {
  // Times in seconds; memory in units, converted with `bytes_per_unit`.
  schedule::CostModel costs;
  double bytes_per_unit = 1 << 20;
  int64_t boundary_elements = 1024;
  // Copy thread bandwidth cap for OFFLOAD/RELOAD in bytes/s (0 = memcpy speed).
  double copy_bandwidth_bytes_per_s = 0;
};

class EmulatedStageRunner final : public StageRunner {
 public:
  EmulatedStageRunner(kernels::Backend* backend, int num_stages, EmulatedStageConfig config);

  kernels::Backend& backend() override { return *backend_; }
  absl::Status BeginStep(int step) override;
  absl::StatusOr<kernels::Tensor> Forward(int stage, int microbatch,
                                          kernels::Tensor input) override;
  absl::StatusOr<kernels::Tensor> BackwardInput(int stage, int microbatch,
                                                kernels::Tensor grad_output) override;
  absl::Status BackwardWeight(int stage, int microbatch) override;
  absl::StatusOr<kernels::Tensor> Backward(int stage, int microbatch,
                                           kernels::Tensor grad_output) override;
  absl::Status Offload(int stage, int microbatch, bool explicit_release = false) override;
  absl::Status Reload(int stage, int microbatch) override;
  absl::Status Release(int stage, int microbatch) override;
  // No gradients: no norm exchange, and EndStep has no update to apply, hold open or skip.
  absl::StatusOr<bool> SumGradientSquares() override { return false; }
  absl::StatusOr<double> AddGradientSquares(int /*stage*/, double running) override {
    return running;
  }
  absl::StatusOr<StepEnd> EndStep(std::optional<GradientNormPart> norm) override;
  absl::Status SettleUpdate(double /*sum_squares*/) override { return absl::OkStatus(); }
  // Validation: F's time, nothing stored, no loss.
  absl::Status BeginValidation(int /*completed_steps*/) override { return absl::OkStatus(); }
  absl::StatusOr<kernels::Tensor> ValidationForward(int stage, int microbatch,
                                                    kernels::Tensor input) override;
  absl::StatusOr<std::optional<double>> EndValidation() override {
    return std::optional<double>();
  }

  int64_t activation_bytes() const override { return stored_bytes_; }
  int64_t peak_activation_bytes() const override { return peak_bytes_; }
  void ResetActivationPeak() override { peak_bytes_ = stored_bytes_; }
  int64_t offloaded_bytes() const override { return offloaded_bytes_; }

  // Copy-engine counters and the time compute spent waiting for late reloads.
  CopierStats copier_stats() const { return copier_.stats(); }
  int64_t reload_wait_ns() const { return offloads_.wait_ns(); }
  int64_t reload_waits() const { return offloads_.waits(); }

 private:
  // What F stored for one (stage, microbatch): the part B frees and the part W frees.
  struct Stored {
    kernels::Tensor until_b;
    kernels::Tensor until_w;
  };
  int64_t Key(int stage, int microbatch) const {
    return static_cast<int64_t>(microbatch) * num_stages_ + stage;
  }
  void Wait(double seconds);
  absl::StatusOr<Stored*> Find(int stage, int microbatch, const char* action);
  absl::StatusOr<kernels::Tensor> Boundary(const char* what);
  void Account(int64_t delta);
  // After every compute action: frees the device copies of finished offloads.
  void ComputeEnded();
  absl::StatusOr<kernels::Tensor> ReleaseUntilB(int stage, int microbatch);

  kernels::Backend* backend_;
  const int num_stages_;
  const EmulatedStageConfig config_;
  absl::flat_hash_map<int64_t, Stored> store_;
  int64_t stored_bytes_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t offloaded_bytes_ = 0;
  // Declared after store_: destroyed first, so every copy into a stash finishes before it dies.
  ActivationCopier copier_;
  OffloadTable offloads_{&copier_};
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_EMULATED_STAGE_RUNNER_H_
