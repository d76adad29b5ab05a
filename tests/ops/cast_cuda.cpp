#include <gtest/gtest.h>

#include "ops/cast/cast.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

// Host and device conversions both round to nearest even: the results must match bit for bit (values stay
// below f16's overflow so that all_close compares finite numbers).
TEST(CastCuda, MatchesCpuExactly) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({7, 131}, 21, -60000, 60000, DType::f32).set_requires_grad(true);
  for (DType target : {DType::f16, DType::bf16, DType::f64}) {
    EXPECT_TRUE(testing::cuda_parity([target](const std::vector<Tensor>& in) { return cast(in[0], target); },
                                     {x}, {/*atol=*/0, /*rtol=*/0}))
        << dtype_name(target);
  }
}

// On the device the input is bf16, so cast(x, f32) converts there while the CPU reference returns x itself.
TEST(CastCuda, FromHalfToF32) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({1000}, 22, -4, 4, DType::f32).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = 1e-2;
  options.rtol = 1e-2;
  options.cuda_dtype = DType::bf16;
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return cast(in[0], DType::f32); }, {x},
                                   options));
}

TEST(CastCuda, StridedInput) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({33, 17}, 23, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) {
        return cast(in[0].permute({1, 0}), DType::f16);
      },
      {x}, {/*atol=*/0, /*rtol=*/0}));
}

TEST(CastCuda, StaysOnTheDevice) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = Tensor::ones({4}, DType::f32, Device::cuda());
  const Tensor y = cast(x, DType::f16);
  EXPECT_EQ(y.device(), Device::cuda());
  EXPECT_EQ(y.dtype(), DType::f16);
}

}  // namespace
}  // namespace liftoff
