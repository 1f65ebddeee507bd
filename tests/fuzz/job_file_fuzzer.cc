// libFuzzer target for job files, the path `pipetrain submit/local FILE` takes: any text read as
// YAML and as JSON (client/job_file.h) must answer OK or INVALID_ARGUMENT naming the file, never
// throw or crash; a spec it yields must keep the promise of tests/coordinator/spec_contract.h; and
// a spec's YAML rendering (--print-default-job, templates) must read back as the same spec.
// Built only with clang (-DPIPETRAIN_FUZZ=ON); scripts/fuzz.sh builds and runs it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "client/job_file.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/coordinator/spec_contract.h"

namespace {

[[noreturn]] void Broken(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "job file contract broken: %s\ninput:\n%s\n", what.c_str(), text.c_str());
  std::abort();  // libFuzzer saves the input as a crash artifact
}

void Check(const std::string& text, const std::string& name) {
  const absl::StatusOr<pipetrain::v1::JobSpec> spec = pipetrain::client::ParseJobSpec(text, name);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument ||
        !absl::StartsWith(spec.status().message(), name + ": ")) {
      Broken("reading " + name + " answered " + spec.status().ToString() +
                 "; only INVALID_ARGUMENT starting with the file name is allowed",
             text);
    }
    return;
  }
  const pipetrain::coordinator::SpecContractResult result =
      pipetrain::coordinator::CheckSpecContract(*spec);
  if (!result.broken.empty()) Broken(result.broken + "\nspec:\n" + spec->DebugString(), text);

  const std::string yaml = pipetrain::client::JobSpecToYaml(*spec);
  const absl::StatusOr<pipetrain::v1::JobSpec> again =
      pipetrain::client::ParseJobSpec(yaml, "rendered.yaml");
  if (!again.ok()) {
    Broken("the YAML rendering does not read back: " + again.status().ToString() + "\nyaml:\n" +
               yaml,
           text);
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(*spec, *again)) {
    Broken("the YAML rendering reads back as another spec\nspec:\n" + spec->DebugString() +
               "yaml:\n" + yaml + "read back:\n" + again->DebugString(),
           text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Protobuf logs every invalid UTF-8 string it meets: noise, and slow.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Check(text, "job.yaml");
  Check(text, "job.json");
  return 0;
}
