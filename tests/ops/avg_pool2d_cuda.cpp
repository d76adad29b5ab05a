#include <gtest/gtest.h>

#include "ops/avg_pool2d/avg_pool2d.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  int64_t kernel, stride, padding;
};
const std::vector<Case> kCases = {{2, 2, 0}, {3, 2, 1}, {3, 1, 1}, {4, 3, 2}};

void check(DType dtype, double tol) {
  for (const Case& c : kCases) {
    const Tensor x = testing::random_tensor({4, 6, 13, 11}, 6, -1, 1, DType::f32).set_requires_grad(true);
    testing::ParityOptions options;
    options.atol = tol;
    options.rtol = tol;
    options.cuda_dtype = dtype;
    const int64_t k = c.kernel, s = c.stride, p = c.padding;
    EXPECT_TRUE(testing::cuda_parity(
        [k, s, p](const std::vector<Tensor>& in) { return avg_pool2d(in[0], k, s, p); }, {x}, options))
        << dtype_name(dtype) << " k" << k << " s" << s << " p" << p;
  }
}

TEST(AvgPool2dCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  check(DType::f32, 1e-6);
  check(DType::f64, 1e-6);  // the CPU reference is f32
}

TEST(AvgPool2dCuda, MatchesCpuInHalfTypes) {
  LIFTOFF_REQUIRE_CUDA();
  check(DType::bf16, 2e-2);
  check(DType::f16, 3e-3);
}

}  // namespace
}  // namespace liftoff
