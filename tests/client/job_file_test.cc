// Job files (client/job_file.h): regressions found by tests/fuzz/job_file_fuzzer.
#include "client/job_file.h"

#include <cmath>

#include "client/default_job.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "model/job_model.h"
#include "planner/job_spec_validation.h"

namespace pipetrain::client {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(JobFileTest, InvalidUtf8IsAnErrorNotATerminate) {
  // Used to escape as nlohmann::json::type_error (316) and terminate the client.
  const absl::StatusOr<v1::JobSpec> spec = ParseJobSpec("name: \"a\xbd\"\n", "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("job.yaml: not valid UTF-8: "));
}

TEST(JobFileTest, EmptyOrScalarYamlSaysAMappingIsExpected) {
  for (const char* text : {"", "# only a comment\n", "42\n", "- a\n- b\n"}) {
    const absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text, "job.yaml");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(spec.status().message(),
              "job.yaml: expected a mapping of JobSpec fields (name, model, training, ...)");
  }
}

// The YAML rendering (--print-default-job, templates) reads back as the same spec.
void ExpectRoundTrip(const v1::JobSpec& spec) {
  const std::string yaml = JobSpecToYaml(spec);
  const absl::StatusOr<v1::JobSpec> again = ParseJobSpec(yaml, "rendered.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_TRUE(MessageDifferencer::Equals(spec, *again)) << yaml << "\n" << again->DebugString();
}

TEST(JobFileTest, RenderingReadsBackAsTheSameSpec) {
  ExpectRoundTrip(DefaultJobSpec());
  // An empty spec used to render as an empty file, which does not read back.
  EXPECT_EQ(JobSpecToYaml(v1::JobSpec()), "{}\n");
  ExpectRoundTrip(v1::JobSpec());
  // A set but empty message used to render as `optimizer:` (null: read back as unset).
  v1::JobSpec spec = DefaultJobSpec();
  spec.mutable_training()->clear_optimizer();
  spec.mutable_training()->mutable_optimizer();
  EXPECT_THAT(JobSpecToYaml(spec), HasSubstr("  optimizer: {}\n"));
  ExpectRoundTrip(spec);
}

// A negative zero reads as zero: proto3 keeps -0.0 as a set field, and its rendering ("0") read
// back as an unset one (found by the fuzzer in `host_link_bytes_per_s: -.0e8`).
TEST(JobFileTest, NegativeZeroReadsAsZero) {
  for (const char* name : {"job.yaml", "job.json"}) {
    const std::string text = std::string(name) == "job.yaml"
                                 ? "memory:\n  host_link_bytes_per_s: -.0e8\n"
                                 : R"({"memory": {"host_link_bytes_per_s": -0.0}})";
    const absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text, name);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_FALSE(std::signbit(spec->memory().host_link_bytes_per_s())) << name;
    v1::JobSpec zero;
    zero.mutable_memory();
    EXPECT_TRUE(MessageDifferencer::Equals(*spec, zero)) << name << "\n" << spec->DebugString();
    ExpectRoundTrip(*spec);
  }
  // Other negatives stay what they are (validation rejects them, naming the field).
  const absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpec("memory:\n  host_link_bytes_per_s: -1e8\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->memory().host_link_bytes_per_s(), -1e8);
}

// --print-default-job's template lists every field, defaults and zeros included, and reads back
// as the job with its defaults filled in (which validates).
TEST(JobFileTest, TemplateWithEveryFieldReadsBackAsTheFilledInJob) {
  const std::string yaml = JobSpecToYamlWithEveryField(DefaultJobSpec());
  for (const char* line : {"max_restarts: 3\n", "  keep_last: 3\n", "  dir: \"\"\n",
                           "  device_budget_bytes: \"0\"\n", "compute:\n", "  precision: ",
                           "    beta2: 0.95\n", "  analytic_costs: false\n"}) {
    EXPECT_THAT(yaml, HasSubstr(line)) << yaml;
  }
  const absl::StatusOr<v1::JobSpec> again = ParseJobSpec(yaml, "template.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  v1::JobSpec filled = model::WithDefaults(DefaultJobSpec());
  EXPECT_TRUE(MessageDifferencer::Equivalent(filled, *again)) << yaml;
  EXPECT_TRUE(planner::ValidateJobSpec(*again).ok()) << planner::ValidateJobSpec(*again);
}

// Enum values as the CLI spells them: short, any case, '-' for '_'; the full names still work.
TEST(JobFileTest, EnumsTakeShortNames) {
  const absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "memory: {offload: selective, device_budget_bytes: 1000}\n"
      "compute: {device: CUDA, precision: bf16}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->memory().offload(), v1::OFFLOAD_POLICY_SELECTIVE);
  EXPECT_EQ(spec->compute().device(), v1::DEVICE_KIND_CUDA);
  EXPECT_EQ(spec->compute().precision(), v1::PRECISION_BF16);
  const absl::StatusOr<v1::JobSpec> json = ParseJobSpec(
      R"({"memory": {"offload": "OFFLOAD_POLICY_FULL"}, "compute": {"device": "cpu"}})",
      "job.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->memory().offload(), v1::OFFLOAD_POLICY_FULL);
  EXPECT_EQ(json->compute().device(), v1::DEVICE_KIND_CPU);

  const absl::StatusOr<v1::JobSpec> bad =
      ParseJobSpec("memory: {offload: sometimes}\n", "job.yaml");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "job.yaml: memory.offload: \"sometimes\" is not one of: none, half, full, selective, "
            "auto (or the full names, e.g. OFFLOAD_POLICY_AUTO)");
  EXPECT_THAT(std::string(ParseJobSpec("{\"name\": ", "job.json").status().message()),
              StartsWith("job.json: not valid JSON: "));
}

}  // namespace
}  // namespace pipetrain::client
