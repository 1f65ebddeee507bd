// The CPU worker's MFU peak probe (worker/runtime/core_sgemm.h): a positive, finite rate from a
// short single-threaded sgemm loop, and bad options refused. (Not a speed test: any machine
// passes; the figure is only checked to be a rate.)
#include "worker/runtime/core_sgemm.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pipetrain::worker {
namespace {

TEST(CoreSgemmTest, MeasuresAPositiveRate) {
  CoreSgemmOptions options;
  options.n = 64;
  options.budget = absl::Milliseconds(20);
  options.max_rounds = 5;
  absl::StatusOr<double> rate = MeasureCoreSgemmFlops(options);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_TRUE(std::isfinite(*rate));
  EXPECT_GT(*rate, 0);
}

TEST(CoreSgemmTest, RefusesBadOptions) {
  CoreSgemmOptions tiny;
  tiny.n = 8;
  EXPECT_EQ(MeasureCoreSgemmFlops(tiny).status().code(), absl::StatusCode::kInvalidArgument);
  CoreSgemmOptions none;
  none.max_rounds = 0;
  EXPECT_EQ(MeasureCoreSgemmFlops(none).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::worker
