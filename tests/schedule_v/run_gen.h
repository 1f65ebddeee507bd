// RunGen: generate a named schedule, validate it and simulate it under CostModelFor(spec), for the
// V family's and auto's tests. A failure is recorded as a test failure and reads as zeros.
// Thread-safety: test-only free function.
#ifndef PIPETRAIN_TESTS_SCHEDULE_V_RUN_GEN_H_
#define PIPETRAIN_TESTS_SCHEDULE_V_RUN_GEN_H_

#include <string>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/sim_result.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::schedule::testing {

struct Measured {
  double bubble = 0, peak = 0, makespan = 0;
};

inline Measured RunGen(const std::string& name, const PipelineSpec& spec) {
  absl::StatusOr<Schedule> s = Generate(name, spec);
  EXPECT_TRUE(s.ok()) << name << ": " << s.status();
  if (!s.ok()) return {};
  EXPECT_TRUE(ValidateSchedule(*s).ok());
  absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return {r->bubble_ratio, MaxPeak(*r), r->makespan};
}

}  // namespace pipetrain::schedule::testing

#endif  // PIPETRAIN_TESTS_SCHEDULE_V_RUN_GEN_H_
