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

// The bias kernels' regimes: many rows of a [N, L, E] input (the column sums split over rows), vector-aligned
// widths (192: 16-byte packs) and odd ones (7, 33: one element at a time), in f32 and bf16.
TEST(LinearCuda, BiasAddAndGradientMatchCpuForManyRowsAndOddWidths) {
  LIFTOFF_REQUIRE_CUDA();
  struct Case {
    int64_t n, l, in, out;
  };
  for (const Case c : {Case{16, 65, 24, 192}, Case{3, 700, 16, 7}, Case{2, 9, 5, 33}}) {
    const Tensor x = testing::random_tensor({c.n, c.l, c.in}, 21, -1, 1, DType::f32).set_requires_grad(true);
    const Tensor w = testing::random_tensor({c.out, c.in}, 22, -0.2, 0.2, DType::f32).set_requires_grad(true);
    const Tensor b = testing::random_tensor({c.out}, 23, -1, 1, DType::f32).set_requires_grad(true);
    for (DType dt : {DType::f32, DType::bf16}) {
      testing::ParityOptions options;
      options.cuda_dtype = dt;
      // bf16: the bias gradient sums up to 2,100 rounded terms (magnitude ~30), kept in f32 and rounded once.
      options.atol = dt == DType::bf16 ? 0.5 : 1e-4;
      options.rtol = dt == DType::bf16 ? 2e-2 : 1e-4;
      EXPECT_TRUE(testing::cuda_parity(
          [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b}, options))
          << dtype_name(dt) << " rows " << c.n * c.l << " out " << c.out;
    }
  }
}

TEST(LinearCuda, RejectsMixedDevices) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_THROW(linear(Tensor::zeros({2, 3}, DType::f32, Device::cuda()), Tensor::zeros({4, 3})), DeviceError);
}

}  // namespace
}  // namespace liftoff
