// Deterministic randomized fuzzing of JobSpec validation in every build (coverage-guided
// fuzzing of the same contract is tests/fuzz/job_spec_fuzzer.cc, run by scripts/fuzz.sh): random
// bytes, mutations of a valid spec's bytes and random field values must keep the promise of
// spec_contract.h. Runs for a bounded time (PIPETRAIN_FUZZ_SECONDS, default 3).
#include <cmath>
#include <cstdlib>
#include <random>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/spec_contract.h"
#include "tests/coordinator/test_util.h"

namespace pipetrain::coordinator {
namespace {

int64_t Interesting(std::mt19937_64& rng) {
  static constexpr int64_t kValues[] = {0,
                                        1,
                                        2,
                                        3,
                                        4,
                                        7,
                                        8,
                                        16,
                                        64,
                                        100,
                                        4096,
                                        65537,
                                        -1,
                                        -2,
                                        1LL << 31,
                                        (1LL << 31) - 1,
                                        -(1LL << 31),
                                        1LL << 40};
  return kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
}

void Mutate(std::string& bytes, std::mt19937_64& rng) {
  const int edits = 1 + rng() % 4;
  for (int e = 0; e < edits && !bytes.empty(); ++e) {
    const size_t at = rng() % bytes.size();
    switch (rng() % 4) {
      case 0:
        bytes[at] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1:
        bytes[at] = static_cast<char>(rng());
        break;
      case 2:
        bytes.resize(at);
        break;
      default:
        bytes.insert(at, 1, static_cast<char>(rng()));
    }
  }
}

v1::JobSpec RandomFields(std::mt19937_64& rng) {
  v1::JobSpec spec = testing::SmallSpec(1 + rng() % 4, 1 + rng() % 3);
  auto pick = [&](auto setter) {
    if (rng() % 3 == 0) setter(Interesting(rng));
  };
  pick([&](int64_t v) { spec.mutable_model()->set_num_layers(static_cast<int32_t>(v)); });
  pick([&](int64_t v) { spec.mutable_model()->set_hidden(static_cast<int32_t>(v)); });
  pick([&](int64_t v) { spec.mutable_model()->set_num_heads(static_cast<int32_t>(v)); });
  pick([&](int64_t v) { spec.mutable_model()->set_seq_len(static_cast<int32_t>(v)); });
  pick([&](int64_t v) { spec.mutable_model()->set_vocab_size(static_cast<int32_t>(v)); });
  pick([&](int64_t v) { spec.mutable_training()->set_global_batch(static_cast<int32_t>(v)); });
  pick([&](int64_t v) { spec.mutable_training()->set_microbatch_size(static_cast<int32_t>(v)); });
  pick([&](int64_t v) { spec.mutable_parallelism()->set_num_workers(static_cast<int32_t>(v)); });
  pick([&](int64_t v) {
    spec.mutable_parallelism()->set_chunks_per_worker(static_cast<int32_t>(v));
  });
  pick([&](int64_t v) { spec.mutable_memory()->set_device_budget_bytes(v); });
  if (rng() % 4 == 0) {
    static const char* kSchedules[] = {"",       "auto",  "gpipe", "1f1b", "zb-h1",
                                       "v-half", "v-min", "zb-v",  "nope", "interleaved-1f1b"};
    spec.mutable_parallelism()->set_schedule(kSchedules[rng() % 10]);
  }
  if (rng() % 8 == 0) {
    spec.mutable_training()->mutable_optimizer()->set_learning_rate(
        rng() % 2 ? NAN : -static_cast<double>(rng() % 10));
  }
  return spec;
}

TEST(JobSpecFuzzTest, ValidationNeverCrashesAndNamesTheField) {
  const char* env = std::getenv("PIPETRAIN_FUZZ_SECONDS");
  const absl::Duration budget = absl::Seconds(env != nullptr ? std::atof(env) : 3.0);
  const absl::Time deadline = absl::Now() + budget;
  std::mt19937_64 rng(20240601);
  const std::string seed_bytes = testing::SmallSpec().SerializeAsString();
  int runs = 0, valid = 0, planned = 0;
  while (absl::Now() < deadline || runs < 1000) {
    ++runs;
    v1::JobSpec spec;
    switch (runs % 3) {
      case 0: {
        std::string bytes(rng() % 64, '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        if (!spec.ParseFromString(bytes)) continue;
        break;
      }
      case 1: {
        std::string bytes = seed_bytes;
        Mutate(bytes, rng);
        if (!spec.ParseFromString(bytes)) continue;
        break;
      }
      default:
        spec = RandomFields(rng);
    }
    const SpecContractResult result = CheckSpecContract(spec);
    ASSERT_EQ(result.broken, "") << spec.DebugString();
    valid += result.valid;
    planned += result.planned;
  }
  RecordProperty("runs", runs);
  std::printf("fuzz: %d runs, %d valid specs, %d planned\n", runs, valid, planned);
}

}  // namespace
}  // namespace pipetrain::coordinator
