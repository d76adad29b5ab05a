#include <gtest/gtest.h>

#include "ops/linear/linear.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

TEST(LinearCuda, MatmulMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor a = testing::random_tensor({37, 65}, 1, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({65, 19}, 2, -1, 1, DType::f32).set_requires_grad(true);
  // f32 GEMM without TF32: only the summation order differs from Eigen.
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b},
                                   {/*atol=*/1e-5, /*rtol=*/1e-4}));
}

TEST(LinearCuda, LinearMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({64, 100}, 3, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor w = testing::random_tensor({10, 100}, 4, -0.1, 0.1, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({10}, 5, -1, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                                   {x, w, b}, {/*atol=*/1e-5, /*rtol=*/1e-4}));
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w},
                                   {/*atol=*/1e-5, /*rtol=*/1e-4}));
}

TEST(LinearCuda, LinearMatchesCpuInF64) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({9, 31}, 6).set_requires_grad(true);
  const Tensor w = testing::random_tensor({7, 31}, 7).set_requires_grad(true);
  const Tensor b = testing::random_tensor({7}, 8).set_requires_grad(true);
  testing::ParityOptions options;
  options.atol = 1e-12;
  options.rtol = 1e-12;
  options.cuda_dtype = DType::f64;
  EXPECT_TRUE(testing::cuda_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                                   {x, w, b}, options));
}

TEST(LinearCuda, LinearMatchesCpuInHalfTypes) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({32, 48}, 9, -1, 1, DType::f32).set_requires_grad(true);
  const Tensor w = testing::random_tensor({16, 48}, 10, -0.2, 0.2, DType::f32).set_requires_grad(true);
  const Tensor b = testing::random_tensor({16}, 11, -1, 1, DType::f32).set_requires_grad(true);
  for (DType dt : {DType::f16, DType::bf16}) {
    testing::ParityOptions options;
    // Inputs and outputs rounded to 16 bits (bf16: 8 mantissa bits), sums of 48 (forward) or 32 (grads)
    // terms.
    options.atol = dt == DType::bf16 ? 6e-2 : 1e-2;
    options.rtol = dt == DType::bf16 ? 2e-2 : 5e-3;
    options.cuda_dtype = dt;
    EXPECT_TRUE(testing::cuda_parity(
        [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b}, options))
        << dtype_name(dt);
  }
}

TEST(LinearCuda, RejectsMixedDevices) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_THROW(linear(Tensor::zeros({2, 3}, DType::f32, Device::cuda()), Tensor::zeros({4, 3})), DeviceError);
}

}  // namespace
}  // namespace liftoff
