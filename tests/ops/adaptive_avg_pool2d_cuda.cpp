#include <gtest/gtest.h>

#include "ops/adaptive_avg_pool2d/adaptive_avg_pool2d.h"
#include "tests/common/cuda_test.h"
#include "tests/ops/dtype_cases.h"

namespace liftoff {
namespace {

TEST(AdaptiveAvgPool2dCuda, MatchesCpuInAllDtypesAndLayouts) {
  LIFTOFF_REQUIRE_CUDA();
  for (const std::vector<int64_t>& size : {std::vector<int64_t>{3, 2}, {1, 1}, {7, 5}, {4, 4}, {11, 9}}) {
    testing::expect_layout_parity([&](const Tensor& x) { return adaptive_avg_pool2d(x, size); }, {2, 6, 7, 5},
                                  shape_str(size));
  }
}

// Output size 1 runs the global pool's kernels; a CNN head's shape takes their packed paths.
TEST(AdaptiveAvgPool2dCuda, OutputOfOneMatchesCpuOnACnnHead) {
  LIFTOFF_REQUIRE_CUDA();
  testing::expect_layout_parity([](const Tensor& x) { return adaptive_avg_pool2d(x, {1}); }, {8, 64, 4, 4},
                                "[8, 64, 4, 4] -> 1");
}

}  // namespace
}  // namespace liftoff
