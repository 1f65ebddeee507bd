// The promise JobSpec validation and planning make about any input, checked by the fuzzers
// (tests/coordinator/job_spec_fuzz_test.cc in every build, tests/fuzz/job_spec_fuzzer.cc under
// libFuzzer): validation answers OK or INVALID_ARGUMENT with a message that starts with the
// field's path ("model.hidden: ..."); a valid spec small enough to plan in milliseconds plans to
// OK, INVALID_ARGUMENT or RESOURCE_EXHAUSTED (budget too small). Nothing crashes or hangs.
//
// Thread-safety: thread-safe (pure).
#ifndef PIPETRAIN_TESTS_COORDINATOR_SPEC_CONTRACT_H_
#define PIPETRAIN_TESTS_COORDINATOR_SPEC_CONTRACT_H_

#include <string>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::coordinator {

struct SpecContractResult {
  bool valid = false;    // validation said OK
  bool planned = false;  // it was small enough and went through the planner
  std::string broken;    // empty when the promise held; else what broke
};

SpecContractResult CheckSpecContract(const v1::JobSpec& spec);

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_TESTS_COORDINATOR_SPEC_CONTRACT_H_
