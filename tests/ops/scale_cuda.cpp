#include <gtest/gtest.h>

#include "ops/scale/scale.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(ScaleCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({5, 129}, 1, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return scale(in[0], -0.375); }, {x},
                                   {/*atol=*/0, /*rtol=*/0}));
}

TEST(ScaleCuda, MatchesCpuInBf16) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({777}, 2, -1, 1, DType::f32).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = 1e-2;
  options.rtol = 1e-2;
  options.cuda_dtype = DType::bf16;
  EXPECT_TRUE(
      testing::cuda_parity([](const std::vector<Tensor>& in) { return scale(in[0], 3.0); }, {x}, options));
}

}  // namespace
}  // namespace liftoff
