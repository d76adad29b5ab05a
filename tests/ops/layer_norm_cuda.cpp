// CUDA layer_norm against the CPU reference: warp-per-row and block-per-row kernels, vector and scalar
// loads, the two-stage weight/bias gradient over many rows, f32/f64/f16/bf16, autocast.
#include <gtest/gtest.h>

#include "ops/layer_norm/layer_norm.h"
#include "runtime/autocast.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape x, normalized;
  // The weight/bias gradients sum over the rows; with many rows the 16-bit rounding of the output gradient
  // (the CPU side keeps it in f32) grows past any useful tolerance, so such cases run in f32/f64 only.
  bool reduced_precision_too = true;
};
// cols 7 (scalar loads), 64 (vector loads), 1029 and 1536 (a block per row; scalar / vector), 300 rows (the
// column reduction in several chunks).
const std::vector<Case> kCases = {{{5, 7}, {7}},
                                  {{3, 4, 64}, {64}},
                                  {{4, 1029}, {1029}},
                                  {{3, 2, 768}, {2, 768}},
                                  {{300, 40}, {40}, false}};

// Inputs are rounded to the device dtype first, so the CPU reference sees the values the device sees.
::testing::AssertionResult parity(const Case& c, DType dtype, double atol, double rtol, bool affine = true) {
  const DType reference = dtype == DType::f64 ? DType::f64 : DType::f32;
  auto input = [&](const Shape& shape, uint64_t seed, double low, double high) {
    return testing::random_tensor(shape, seed, low, high, reference)
        .to(dtype)
        .to(reference)
        .set_requires_grad(true);
  };
  const Tensor x = input(c.x, 1, -2, 3);
  const Tensor w = affine ? input(c.normalized, 2, 0.5, 1.5) : Tensor();
  const Tensor b = affine ? input(c.normalized, 3, -1, 1) : Tensor();
  testing::ParityOptions options;
  options.atol = atol;
  options.rtol = rtol;
  options.cuda_dtype = dtype;
  const Shape normalized = c.normalized;
  return testing::cuda_parity(
      [normalized](const std::vector<Tensor>& in) { return layer_norm(in[0], normalized, in[1], in[2]); },
      {x, w, b}, options);
}

TEST(LayerNormCuda, MatchesCpuF32) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) EXPECT_TRUE(parity(c, DType::f32, 1e-4, 1e-4)) << shape_str(c.x);
  EXPECT_TRUE(parity(kCases[1], DType::f32, 1e-4, 1e-4, /*affine=*/false));
}

TEST(LayerNormCuda, MatchesCpuF64) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) EXPECT_TRUE(parity(c, DType::f64, 1e-10, 1e-10)) << shape_str(c.x);
}

TEST(LayerNormCuda, MatchesCpuF16) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, DType::f16, 2e-2, 2e-2)) << shape_str(c.x);
  }
}

TEST(LayerNormCuda, MatchesCpuBF16) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, DType::bf16, 6e-2, 5e-2)) << shape_str(c.x);
  }
}

TEST(LayerNormCuda, AutocastComputesInF32) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4, 32}, 5, -1, 1, DType::f32);
  const Tensor w = testing::random_tensor({32}, 6, 0.5, 1.5, DType::f32);
  const Tensor x_half = x.to(Device::cuda(0), DType::bf16);
  AutocastGuard autocast(DType::bf16);
  const Tensor y = layer_norm(x_half, {32}, w.to(Device::cuda(0)));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu()),
                                 layer_norm(x_half.to(Device::cpu(), DType::f32), {32}, w), 1e-5, 1e-5));
}

}  // namespace
}  // namespace liftoff
