// FakeTransportHopLatency: the one-way latency of a small message between two threads through
// the in-memory transport (worker/transport/fake_transport.h), from `round_trips` echoes of a
// message of `floats` floats. The emulated-pipeline benches charge it per transfer when they
// compare the simulator with the in-process runtime.
// Thread-safety: starts and joins its own echo thread.
#ifndef PIPETRAIN_BENCH_RUNTIME_HOP_LATENCY_H_
#define PIPETRAIN_BENCH_RUNTIME_HOP_LATENCY_H_

#include <chrono>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "worker/transport/fake_transport.h"

namespace pipetrain::bench {

inline double FakeTransportHopLatency(int round_trips, int floats) {
  worker::FakeTransportHub hub(2);
  std::thread echo([&] {
    for (int i = 0; i < round_trips; ++i) {
      worker::MessageKey key{i, 0, 0, worker::TensorRole::kActivation};
      auto m = hub.endpoint(1)->Recv(0, key, absl::InfiniteFuture());
      m->key.role = worker::TensorRole::kGradient;
      (void)hub.endpoint(1)->Send(0, std::move(*m));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < round_trips; ++i) {
    worker::Message m;
    m.key = worker::MessageKey{i, 0, 0, worker::TensorRole::kActivation};
    m.shape = {floats};
    m.data.assign(floats, 1.0f);
    (void)hub.endpoint(0)->Send(1, std::move(m));
    (void)hub.endpoint(0)->Recv(1, worker::MessageKey{i, 0, 0, worker::TensorRole::kGradient},
                                absl::InfiniteFuture());
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  echo.join();
  return total / round_trips / 2;
}

}  // namespace pipetrain::bench

#endif  // PIPETRAIN_BENCH_RUNTIME_HOP_LATENCY_H_
