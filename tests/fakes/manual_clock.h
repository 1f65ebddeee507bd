// ManualClock: the test double of common/clock.h.
#ifndef PIPETRAIN_TESTS_FAKES_MANUAL_CLOCK_H_
#define PIPETRAIN_TESTS_FAKES_MANUAL_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "common/clock.h"

namespace pipetrain {

// A clock that moves only when told: by Advance, by `tick_ns` on every NowNs() read (so that
// consecutive reads differ by exactly tick_ns), and to the deadline on SleepUntilNs.
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 0, int64_t tick_ns = 0)
      : now_ns_(start_ns), tick_ns_(tick_ns) {}
  int64_t NowNs() const override { return now_ns_.fetch_add(tick_ns_); }
  void SleepUntilNs(int64_t time_ns) const override {
    int64_t now = now_ns_.load();
    while (now < time_ns && !now_ns_.compare_exchange_weak(now, time_ns)) {
    }
  }
  void Advance(int64_t ns) { now_ns_.fetch_add(ns); }

 private:
  mutable std::atomic<int64_t> now_ns_;
  const int64_t tick_ns_;
};

}  // namespace pipetrain

#endif  // PIPETRAIN_TESTS_FAKES_MANUAL_CLOCK_H_
