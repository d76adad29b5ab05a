#include <gtest/gtest.h>

#include "ops/flip/flip.h"
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

TEST(FlipCuda, EveryDtype) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({3, 4, 5}, 3, -1, 1, DType::f32).set_requires_grad(true);
  for (DType dtype : kAllFloats) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return flip(transpose(in[0], 0, 2), {0, -1});
        },
        {x}, tolerance(dtype)));
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) {
          return roll(in[0], {-3, 7}, {2, 1});
        },
        {x}, tolerance(dtype)));
  }
}

TEST(FlipCuda, IntegersAndChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor i = testing::random_tensor({2, 3, 4, 5}, 4, -50, 50, DType::f32).to(DType::i64);
  const Tensor out = flip(i.to(Device::cuda(0)).contiguous(MemoryFormat::channels_last), {1, 3});
  EXPECT_TRUE(out.is_channels_last());
  EXPECT_EQ(out.to_vector<int64_t>(), flip(i, {1, 3}).to_vector<int64_t>());
}

}  // namespace
}  // namespace liftoff
