// Helpers for coordinator tests: small valid job specs, registering fake workers, bounded waits.
// Thread-safety: functions are thread-safe; no shared state.
#ifndef PIPETRAIN_TESTS_COORDINATOR_TEST_UTIL_H_
#define PIPETRAIN_TESTS_COORDINATOR_TEST_UTIL_H_

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/worker_registry.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::testing {

// A job the real planner plans in milliseconds: the default task, `workers` ranks, 1F1B.
inline v1::JobSpec SmallSpec(int workers = 2, int steps = 3) {
  v1::JobSpec spec;
  spec.set_name("small");
  spec.mutable_model()->set_num_layers(4);
  spec.mutable_model()->set_hidden(16);
  spec.mutable_model()->set_num_heads(2);
  spec.mutable_training()->set_steps(steps);
  spec.mutable_training()->set_global_batch(4);
  spec.mutable_training()->set_microbatch_size(1);
  spec.mutable_training()->mutable_optimizer()->set_learning_rate(1e-3);
  spec.mutable_parallelism()->set_num_workers(workers);
  spec.mutable_parallelism()->set_schedule("1f1b");
  return spec;
}

// Registers fake worker `i` ("w<i>" at 127.0.0.1:(20000+i)); returns its id.
inline std::string AddWorker(coordinator::WorkerRegistry& registry, int i,
                             v1::DeviceKind device = v1::DEVICE_KIND_CPU,
                             const std::string& host = "", int device_index = 0) {
  coordinator::WorkerRegistration r;
  r.name = absl::StrCat("w", i);
  r.address = absl::StrCat("127.0.0.1:", 20000 + i);
  r.transport_address = absl::StrCat("127.0.0.1:", 30000 + i);
  r.device = device;
  r.host = host;
  r.device_index = device_index;
  return registry.Register(r).value();
}

// Polls `done` every 5 ms until it holds or `timeout` passes.
inline bool WaitUntil(const std::function<bool()>& done,
                      absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_COORDINATOR_TEST_UTIL_H_
