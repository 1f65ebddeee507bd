#include "schedule/independent_tasks.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace pipetrain::schedule {

void RunIndependentTasks(int n, const std::function<void(int)>& task, int max_threads) {
  if (n <= 0) return;
  // More threads than cores only adds switching.
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (max_threads > 0) threads = std::min(threads, max_threads);
  threads = std::min(threads, n);
  std::atomic<int> next{0};
  auto drain = [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) task(i);
  };
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) helpers.emplace_back(drain);
  drain();
  for (std::thread& h : helpers) h.join();
}

}  // namespace pipetrain::schedule
