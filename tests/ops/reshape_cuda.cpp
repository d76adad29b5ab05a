#include <gtest/gtest.h>

#include "ops/reshape/reshape.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(ReshapeCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4, 3, 5}, 1, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) {
        return reshape(in[0], {-1, 4});
      },
      {x}, {/*atol=*/0, /*rtol=*/0}));
  // Strided input takes the copy path.
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) {
        return flatten(in[0].permute({2, 0, 1}), 1);
      },
      {x}, {0, 0}));
}

}  // namespace
}  // namespace liftoff
