// Clock: monotonic time in nanoseconds, and sleeping until such a time. The worker runtime
// times every action and emulates link speeds through one Clock*, so that tests can run it on
// a clock they control (tests/fakes/manual_clock.h) and expect exact timings. Production code uses
// Clock::Real(), the process's steady clock.
//
// Thread-safety: implementations are thread-safe.
#ifndef PIPETRAIN_COMMON_CLOCK_H_
#define PIPETRAIN_COMMON_CLOCK_H_

#include <cstdint>

namespace pipetrain {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
  // Returns once NowNs() >= time_ns (at once if it already is).
  virtual void SleepUntilNs(int64_t time_ns) const = 0;

  // std::chrono::steady_clock; never null, never destroyed.
  static const Clock* Real();
};

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_CLOCK_H_
