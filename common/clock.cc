#include "common/clock.h"

#include <chrono>
#include <thread>

namespace pipetrain {
namespace {

class SteadyClock : public Clock {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepUntilNs(int64_t time_ns) const override {
    std::this_thread::sleep_until(
        std::chrono::steady_clock::time_point(std::chrono::nanoseconds(time_ns)));
  }
};

}  // namespace

const Clock* Clock::Real() {
  static const SteadyClock* const kClock = new SteadyClock();
  return kClock;
}

}  // namespace pipetrain
