#include <gtest/gtest.h>

#include "ops/repeat/repeat.h"
#include "ops/views/views.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

const DType kAllFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

testing::ParityOptions tolerance(DType dtype) {
  testing::ParityOptions o;
  o.cuda_dtype = dtype;
  if (dtype == DType::f16 || dtype == DType::bf16) o.atol = o.rtol = 3e-2;
  return o;
}

TEST(RepeatCuda, EveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({3, 4, 5}, 3, -1, 1, DType::f32).set_requires_grad(true);
  for (DType dtype : kAllFloats) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return repeat(in[0], {2, 1, 3});
        },
        {x}, tolerance(dtype)));
    // 80 tiles: the backward takes the warp-per-element reduction.
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return repeat(transpose(in[0], 1, 2), {2, 2, 1, 20});
        },
        {x}, tolerance(dtype)));
  }
}

}  // namespace
}  // namespace liftoff
