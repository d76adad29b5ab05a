#include <gtest/gtest.h>

#include <vector>

#include "ops/max_pool2d/max_pool2d.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

// 256 distinct multiples of 1/32 in [-4, 4): exact in bf16 and f16, so the argmax (and where the gradient
// goes) cannot change with the dtype.
Tensor distinct_input(const Shape& shape) {
  std::vector<float> values;
  for (int i = 0; i < 256; ++i) values.push_back(static_cast<float>((i * 97) % 256 - 128) / 32.0f);
  return Tensor::from_vector<float>(values, shape);
}

struct Case {
  int64_t kernel, stride, padding;
};
const std::vector<Case> kCases = {{2, 2, 0}, {3, 2, 1}, {3, 1, 1}, {2, 1, 1}};

void check(DType dtype, double tol) {
  for (const Case& c : kCases) {
    const Tensor x = distinct_input({2, 2, 8, 8}).set_requires_grad(true);
    testing::ParityOptions options;
    options.atol = tol;
    options.rtol = tol;
    options.cuda_dtype = dtype;
    const int64_t k = c.kernel, s = c.stride, p = c.padding;
    EXPECT_TRUE(testing::cuda_parity(
        [k, s, p](const std::vector<Tensor>& in) { return max_pool2d(in[0], k, s, p); }, {x}, options))
        << dtype_name(dtype) << " k" << k << " s" << s << " p" << p;
  }
}

TEST(MaxPool2dCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  check(DType::f32, 0);     // same values, same summation order as the CPU
  check(DType::f64, 1e-6);  // the CPU reference sums overlapping-window gradients in f32
}

TEST(MaxPool2dCuda, MatchesCpuInHalfTypes) {
  LIFTOFF_REQUIRE_CUDA();
  // Inputs are exact; the parity weights (0.5..1.5) round to 8/11-bit mantissas in the gradient.
  check(DType::bf16, 2e-2);
  check(DType::f16, 2e-3);
}

TEST(MaxPool2dCuda, RandomLargerInput) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({8, 16, 28, 28}, 5, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return max_pool2d(in[0], 3, 2, 1); },
                                   {x}, {/*atol=*/0, /*rtol=*/0}));
}

}  // namespace
}  // namespace liftoff
