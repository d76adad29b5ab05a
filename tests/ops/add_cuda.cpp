#include <gtest/gtest.h>

#include "ops/add/add.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(AddCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({4, 33, 7}, 1, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4, 33, 7}, 2, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return add(in[0], in[1]); }, {a, b},
                                   {/*atol=*/0, /*rtol=*/0}));
}

TEST(AddCuda, MatchesCpuInHalfTypes) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({1000}, 3, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({1000}, 4, -1, 1, DType::f32).set_requires_grad(true);
  for (DType dt : {DType::f16, DType::bf16}) {
    testing::ParityOptions options;
    options.atol = 1e-2;  // inputs are rounded to 16 bits on the device
    options.rtol = 1e-2;
    options.cuda_dtype = dt;
    EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return add(in[0], in[1]); }, {a, b},
                                     options))
        << dtype_name(dt);
  }
}

}  // namespace
}  // namespace liftoff
