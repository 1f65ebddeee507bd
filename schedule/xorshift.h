// XorShift64: a tiny deterministic random stream (Marsaglia's xorshift64, shifts 13/7/17) for the
// schedule library's local searches (order_polish, cyclic_order). A fixed seed keeps generated
// schedules identical bit for bit on every platform and library version.
//
// Thread-safety: a value type; one per search.
#ifndef PIPETRAIN_SCHEDULE_XORSHIFT_H_
#define PIPETRAIN_SCHEDULE_XORSHIFT_H_

#include <cstdint>

namespace pipetrain::schedule {

struct XorShift64 {
  uint64_t state = 0x9E3779B97F4A7C15ull;  // any nonzero seed

  uint64_t Next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // in [0, 1)
};

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_XORSHIFT_H_
