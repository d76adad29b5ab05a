#include <gtest/gtest.h>

#include "ops/softmax/softmax.h"
#include "runtime/autocast.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(SoftmaxCuda, MatchesCpuInEveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  // Short rows (a warp per row, vectorised or not), long rows (a block per row), and an inner dimension.
  const std::vector<std::pair<Shape, int64_t>> cases = {{{37, 10}, 1},  {{64, 128}, -1}, {{3, 5000}, 1},
                                                        {{2, 4099}, 1}, {{4, 7, 9}, 1},  {{6, 3, 2}, 0}};
  for (const auto& [shape, dim] : cases) {
    const Tensor x = testing::random_tensor(shape, 1, -4, 4, DType::f32).set_requires_grad(true);
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      testing::ParityOptions options;
      options.cuda_dtype = dt;
      const bool half = dt == DType::f16 || dt == DType::bf16;
      options.atol = half ? 2e-2 : 1e-5;
      options.rtol = half ? 2e-2 : 1e-4;
      EXPECT_TRUE(testing::cuda_parity([d = dim](const std::vector<Tensor>& in) { return softmax(in[0], d); },
                                       {x}, options))
          << shape_str(shape) << " " << dtype_name(dt);
      options.atol = half ? 6e-2 : 1e-5;  // log_softmax's values reach |-8|
      EXPECT_TRUE(testing::cuda_parity(
          [d = dim](const std::vector<Tensor>& in) { return log_softmax(in[0], d); }, {x}, options))
          << shape_str(shape) << " " << dtype_name(dt);
    }
  }
}

TEST(SoftmaxCuda, AutocastReturnsF32) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = Tensor::ones({4, 8}, DType::f16, Device::cuda());
  EXPECT_EQ(softmax(x, 1).dtype(), DType::f16);
  AutocastGuard autocast(DType::f16);
  EXPECT_EQ(softmax(x, 1).dtype(), DType::f32);
  EXPECT_EQ(log_softmax(x, 1).dtype(), DType::f32);
}

}  // namespace
}  // namespace liftoff
