#include <gtest/gtest.h>

#include "ops/add/add.h"
#include "ops/views/views.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

testing::ParityOptions tolerance(DType dtype) {
  testing::ParityOptions o;
  o.cuda_dtype = dtype;
  if (dtype == DType::f16 || dtype == DType::bf16) o.atol = o.rtol = 2e-2;
  return o;
}

const DType kAllFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

TEST(ViewsCuda, SumToSizeAndExpandBackward) {
  LIFTOFF_REQUIRE_CUDA();
  for (DType dtype : kAllFloats) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = testing::random_tensor({3, 70, 5}, 1, -1, 1, DType::f32).set_requires_grad(true);
    // Short reductions (thread per output) and long ones (warp per output).
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return sum_to_size(transpose(in[0], 0, 2), {5, 1, 1});
        },
        {x}, tolerance(dtype)));
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return sum_to_size(in[0], {3, 1, 5});
        },
        {x}, tolerance(dtype)));
    const Tensor b = testing::random_tensor({4, 1}, 2, -1, 1, DType::f32).set_requires_grad(true);
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return expand(in[0], {100, 4, 3}).contiguous();
        },
        {b}, tolerance(dtype)));
  }
}

TEST(ViewsCuda, StridedSliceBackward) {
  LIFTOFF_REQUIRE_CUDA();
  for (DType dtype : kAllFloats) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = testing::random_tensor({6, 9}, 3, -1, 1, DType::f32).set_requires_grad(true);
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return add(slice(in[0], 1, 0, 9, 3), select(unflatten(in[0], 1, {3, 3}), 2, -1)).contiguous();
        },
        {x}, tolerance(dtype)));
  }
}

}  // namespace
}  // namespace liftoff
