#include <gtest/gtest.h>

#include "ops/relu/relu.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(ReluCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4, 33, 7}, 3, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return relu(in[0]); }, {x},
                                   {/*atol=*/0, /*rtol=*/0}));
}

TEST(ReluCuda, MatchesCpuInBf16) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({1000}, 4, -1, 1, DType::f32).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = 1e-2;
  options.rtol = 1e-2;
  options.cuda_dtype = DType::bf16;
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return relu(in[0]); }, {x}, options));
}

}  // namespace
}  // namespace liftoff
