// libFuzzer target: any bytes that parse as a JobSpec must keep the promise of
// tests/coordinator/spec_contract.h (validation answers OK or INVALID_ARGUMENT naming the field;
// small valid specs plan to OK, INVALID_ARGUMENT or RESOURCE_EXHAUSTED), under AddressSanitizer.
// Built only with clang (-DPIPETRAIN_FUZZ=ON); scripts/fuzz.sh builds and runs it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"
#include "pipetrain/v1/job.pb.h"
#include "tests/coordinator/spec_contract.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Parsing random bytes makes protobuf log every invalid UTF-8 string: noise, and slow.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pipetrain::v1::JobSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return 0;
  const pipetrain::coordinator::SpecContractResult result =
      pipetrain::coordinator::CheckSpecContract(spec);
  if (!result.broken.empty()) {
    std::fprintf(stderr, "JobSpec contract broken: %s\nspec:\n%s\n", result.broken.c_str(),
                 spec.DebugString().c_str());
    std::abort();  // libFuzzer saves the input as a crash artifact
  }
  return 0;
}
