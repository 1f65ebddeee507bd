// FakeWorkerClient: a WorkerClient for tests. Per worker address it can fail or delay Prepare,
// Start and Abort; Prepare can wait for every rank of the job (like real workers, which block in
// Prepare until their pipeline neighbours connect; a sequential dispatcher would then time out).
// With auto-run, Start launches one thread per rank that reports steps start_step.. through the
// given report function (the job manager's ReportStep, with the Prepare's attempt) and then
// `finished`, or a failure at a chosen step; a runner stops when its worker gets an Abort or the
// response says cancel. With spec.checkpoint set, a runner writes (empty) stage files of
// <dir>/step-N for its stages every interval_steps and reports checkpoint_step N, like a worker.
//
// Thread-safety: thread-safe. Call Shutdown() before whatever the report function calls dies.
#ifndef PIPETRAIN_TESTS_FAKES_FAKE_WORKER_CLIENT_H_
#define PIPETRAIN_TESTS_FAKES_FAKE_WORKER_CLIENT_H_

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/worker_client.h"
#include "pipetrain/v1/coordinator.pb.h"

namespace pipetrain::testing {

class FakeWorkerClient : public coordinator::WorkerClient {
 public:
  using ReportFn =
      std::function<absl::StatusOr<v1::ReportStepResponse>(const v1::ReportStepRequest&)>;

  struct Behavior {
    absl::Status prepare_status;
    absl::Status start_status;
    absl::Status abort_status;
    absl::Duration prepare_delay = absl::ZeroDuration();
    absl::Duration start_delay = absl::ZeroDuration();
    absl::Duration abort_delay = absl::ZeroDuration();
    int fail_at_step = -1;   // auto-run: report this failure instead of this step
    bool fail_once = false;  // fail_at_step / crash_in_checkpoint only in the first run here
    int stall_at_step = -1;  // auto-run: stop reporting (silently) at this step
    // auto-run: "killed while writing checkpoint step-N": leave only a temp file for it and
    // report a failure instead of step N-1 (whose report would carry checkpoint_step N).
    int crash_in_checkpoint = -1;
    // CreateNcclId: this status, else "nccl-id-<n>" (n counts the calls).
    absl::Status nccl_id_status;
    // auto-run: the steps whose report says the optimizer update was skipped (non-finite
    // gradients; real ranks agree, so give every rank the same set).
    std::set<int> skipped_updates;
    // auto-run: the steps whose gradients rank 0 (the rank of stage 0) reports clipped; it
    // reports every step's gradient norm as 1 + step / 4.
    std::set<int> clipped_steps;
  };

  ~FakeWorkerClient() override;

  void SetBehavior(const std::string& address, const Behavior& behavior);
  // Prepare waits (up to its timeout) until every rank of the job is in Prepare.
  void SetPrepareBarrier(bool on);
  void SetAutoRun(ReportFn report, absl::Duration step_delay);
  // Answers a Prepare that asks for the profiling step with, for every stage the rank holds,
  // the times `stage_seconds(stage)` returns as {F, B, W}. Unset: no profile (like an old worker).
  using ProfileFn = std::function<std::array<double, 3>(int stage)>;
  void SetProfile(ProfileFn stage_seconds);
  // Stops and joins every runner; later Starts run nothing.
  void Shutdown();

  absl::StatusOr<v1::PrepareResponse> Prepare(const std::string& address,
                                              const v1::PrepareRequest& request,
                                              absl::Duration timeout) override;
  absl::StatusOr<std::string> CreateNcclId(const std::string& address, const std::string& job_id,
                                           absl::Duration timeout) override;
  absl::Status Start(const std::string& address, const v1::StartRequest& request,
                     absl::Duration timeout) override;
  absl::Status Abort(const std::string& address, const v1::AbortRequest& request,
                     absl::Duration timeout) override;
  // Prepares in flight (delayed or at the barrier) and later ones end with Cancelled.
  void CancelLaunchCalls() override;

  std::vector<v1::PrepareRequest> prepared() const;
  // Addresses CreateNcclId was called on, in order.
  std::vector<std::string> nccl_id_calls() const;
  int start_calls() const;
  int abort_calls(const std::string& job_id) const;
  bool aborted(const std::string& job_id) const;

 private:
  void Run(const std::string& address, v1::PrepareRequest prepared, int num_steps, Behavior b,
           int aborts_before);

  mutable absl::Mutex mu_;
  std::map<std::string, Behavior> behaviors_ ABSL_GUARDED_BY(mu_);
  bool barrier_ ABSL_GUARDED_BY(mu_) = false;
  ProfileFn profile_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> in_prepare_ ABSL_GUARDED_BY(mu_);  // by job
  std::vector<v1::PrepareRequest> prepared_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::PrepareRequest> by_address_ ABSL_GUARDED_BY(mu_);
  int start_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> nccl_id_calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> aborts_ ABSL_GUARDED_BY(mu_);             // by job
  std::map<std::string, int> aborts_by_address_ ABSL_GUARDED_BY(mu_);  // by worker
  std::map<std::string, int> runs_ ABSL_GUARDED_BY(mu_);               // by worker
  ReportFn report_ ABSL_GUARDED_BY(mu_);
  absl::Duration step_delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool launches_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> runners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_FAKES_FAKE_WORKER_CLIENT_H_
