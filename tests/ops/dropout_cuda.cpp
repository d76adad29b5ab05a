#include <gtest/gtest.h>

#include "ops/dropout/dropout.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(DropoutCuda, SameMaskAsCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({3, 1001}, 1, -1, 1, DType::f32).set_requires_grad(true);
  // A fresh generator per call: the CPU and the CUDA run draw the same (seed, offset).
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) {
        Generator gen(42);
        gen.next_offset();
        return dropout(in[0], 0.3, true, gen);
      },
      {x}, {/*atol=*/0, /*rtol=*/0}));
}

TEST(DropoutCuda, SameMaskAsCpuInF16) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({999}, 2, -1, 1, DType::f32).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = 5e-3;  // x is rounded to f16, then scaled by 1/(1-p) = 2
  options.rtol = 5e-3;
  options.cuda_dtype = DType::f16;
  EXPECT_TRUE(testing::cuda_parity(
      [](const std::vector<Tensor>& in) {
        Generator gen(5);
        return dropout(in[0], 0.5, true, gen);
      },
      {x}, options));
}

}  // namespace
}  // namespace liftoff
