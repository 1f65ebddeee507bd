#include "worker/runtime/in_process_pipeline.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

absl::StatusOr<std::vector<std::vector<StepResult>>> RunInProcess(
    const schedule::Schedule& schedule, const std::vector<StageRunner*>& runners, int steps,
    FakeTransportHub* hub, ExecutorOptions options) {
  const int p = schedule.num_workers;
  if (static_cast<int>(runners.size()) != p) {
    return absl::InvalidArgumentError(
        absl::StrCat("need one runner per worker: ", runners.size(), " for ", p, " workers"));
  }
  std::vector<std::vector<StepResult>> results(p);
  std::vector<absl::Status> status(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      Executor executor(schedule, r, runners[r], hub->endpoint(r), options);
      for (int step = 0; step < steps; ++step) {
        absl::StatusOr<StepResult> result = executor.RunStep(step);
        if (!result.ok()) {
          status[r] = result.status();
          hub->Kill(r);  // peers waiting on this rank fail fast instead of timing out
          return;
        }
        results[r].push_back(std::move(*result));
      }
      // The last step's verdict, so the runners' weights are final when this returns.
      if (absl::Status settled = executor.SettlePendingUpdate(); !settled.ok()) {
        status[r] = settled;
        hub->Kill(r);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Report the root cause: the first error that is not a consequence of another rank's death.
  for (int r = 0; r < p; ++r) {
    if (!status[r].ok() && status[r].code() != absl::StatusCode::kUnavailable &&
        status[r].code() != absl::StatusCode::kCancelled) {
      return absl::Status(status[r].code(), absl::StrCat("rank ", r, ": ", status[r].message()));
    }
  }
  for (int r = 0; r < p; ++r) {
    if (!status[r].ok()) {
      return absl::Status(status[r].code(), absl::StrCat("rank ", r, ": ", status[r].message()));
    }
  }
  return results;
}

}  // namespace pipetrain::worker
