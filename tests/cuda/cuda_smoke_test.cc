#include "kernels/cuda/smoke.h"

#include <gtest/gtest.h>

namespace pipetrain::kernels::cuda {
namespace {

TEST(CudaSmoke, NcclLinksAndReportsVersion) {
  // ncclGetVersion needs no device: proves the NCCL library is linked and callable.
  EXPECT_GE(NcclVersion(), 21000);
}

TEST(CudaSmoke, SaxpyRunsOnDevice) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible (no GPU or no driver)";
  EXPECT_FLOAT_EQ(SaxpySmoke(2.0f), 48.0f);  // 2 * 4 + 40
}

}  // namespace
}  // namespace pipetrain::kernels::cuda
