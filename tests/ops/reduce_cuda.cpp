#include <gtest/gtest.h>

#include "ops/reduce/reduce.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(ReduceCuda, MatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (int64_t n : {1, 1000, 3000001}) {  // one block, a partial block, many blocks
    const Tensor x = testing::random_tensor({n}, 1, -1, 1, DType::f32).set_requires_grad(true);
    // The CPU sums in f64, CUDA in f32: relative error ~ sqrt(n) * 2^-24 of the absolute sum.
    EXPECT_TRUE(
        testing::cuda_parity([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x}, {1e-3, 1e-5}))
        << n;
    EXPECT_TRUE(
        testing::cuda_parity([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x}, {1e-7, 1e-5}))
        << n;
  }
}

TEST(ReduceCuda, MatchesCpuInBf16) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4096}, 2, 0, 1, DType::f32).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = 1e-2;
  options.rtol = 1e-2;  // the result is rounded to bf16
  options.cuda_dtype = DType::bf16;
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x}, options));
}

TEST(ReduceCuda, Deterministic) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({1 << 22}, 3, -1, 1, DType::f32, Device::cuda());
  const double first = sum(x).item();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sum(x).item(), first);
}

}  // namespace
}  // namespace liftoff
