#include <gtest/gtest.h>

#include "ops/upsample/upsample.h"
#include "tests/common/cuda_test.h"
#include "tests/ops/dtype_cases.h"

namespace liftoff {
namespace {

TEST(InterpolateCuda, MatchesCpuInAllDtypesAndLayouts) {
  LIFTOFF_REQUIRE_CUDA();
  const Shape shape{2, 5, 9, 7};
  for (const std::string mode : {"nearest", "bilinear"}) {
    for (const std::vector<int64_t>& size : {std::vector<int64_t>{18, 14}, {20, 11}, {4, 3}, {9, 7}}) {
      testing::expect_layout_parity([&](const Tensor& x) { return interpolate(x, size, {}, mode); }, shape,
                                    mode + " " + shape_str(size));
    }
    testing::expect_layout_parity(
        [&](const Tensor& x) {
          return interpolate(x, {}, {1.7, 0.6}, mode);
        },
        shape, mode + " x1.7");
  }
  testing::expect_layout_parity(
      [](const Tensor& x) {
        return interpolate(x, {20, 5}, {}, "bilinear", true);
      },
      shape, "bilinear align_corners");
}

}  // namespace
}  // namespace liftoff
