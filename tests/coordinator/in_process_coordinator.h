// An in-process Coordinator over the fake store and fake workers, for the tests that talk to it
// through gRPC or its metrics endpoint: loopback gRPC on an ephemeral port, no metrics endpoint
// unless asked for, a 20 ms scheduler tick, and fake workers that report their steps to it.
// Thread-safety: as Coordinator; the fakes must outlive the Coordinator.
#ifndef PIPETRAIN_TESTS_COORDINATOR_IN_PROCESS_COORDINATOR_H_
#define PIPETRAIN_TESTS_COORDINATOR_IN_PROCESS_COORDINATOR_H_

#include <memory>

#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"

namespace pipetrain::testing {

// A Coordinator on 127.0.0.1:<ephemeral> over `store` and `workers`; tests change what they test.
inline coordinator::CoordinatorConfig InProcessConfig(FakeJobStore* store,
                                                      FakeWorkerClient* workers) {
  coordinator::CoordinatorConfig config;
  config.listen = "127.0.0.1:0";
  config.metrics_listen = "";  // the Exposer has its own test binary
  config.store = store;
  config.worker_client = workers;
  config.jobs.scheduler_tick = absl::Milliseconds(20);
  return config;
}

// Starts `config`'s Coordinator (the test dies if it cannot) and has `workers` run every step
// they are given, `step_delay` each, reporting to its JobManager (FakeWorkerClient::SetAutoRun).
inline std::unique_ptr<coordinator::Coordinator> StartWithFakeSteps(
    const coordinator::CoordinatorConfig& config, FakeWorkerClient* workers,
    absl::Duration step_delay) {
  std::unique_ptr<coordinator::Coordinator> started =
      coordinator::Coordinator::Start(config).value();
  coordinator::Coordinator* c = started.get();
  workers->SetAutoRun([c](const v1::ReportStepRequest& r) { return c->jobs().ReportStep(r); },
                      step_delay);
  return started;
}

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_COORDINATOR_IN_PROCESS_COORDINATOR_H_
