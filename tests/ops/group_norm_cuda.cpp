// CUDA group_norm against the CPU reference: f32/f64/f16/bf16, narrow and wide groups, channels-last input.
#include <gtest/gtest.h>

#include "ops/group_norm/group_norm.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape x;
  int64_t groups;
  // The weight/bias gradients sum over N * HW values: large ones run in f32/f64 only (the 16-bit rounding
  // of the output gradient, which the CPU side keeps in f32, grows with the sum).
  bool reduced_precision_too = true;
};
// Rows of 2*12 (warp per row, scalar), 4*64 (vector), 20*64 and 8*196 (block per row); instance norm; 3-D.
const std::vector<Case> kCases = {{{2, 4, 3, 4}, 2},           {{3, 8, 8, 8}, 2}, {{1, 20, 8, 8}, 1},
                                  {{2, 16, 14, 14}, 2, false}, {{2, 6, 5, 5}, 6}, {{4, 6, 33}, 3}};

// Inputs are rounded to the device dtype first, so the CPU reference sees the values the device sees.
::testing::AssertionResult parity(const Case& c, DType dtype, double atol, double rtol) {
  const DType reference = dtype == DType::f64 ? DType::f64 : DType::f32;
  auto input = [&](const Shape& shape, uint64_t seed, double low, double high) {
    return testing::random_tensor(shape, seed, low, high, reference)
        .to(dtype)
        .to(reference)
        .set_requires_grad(true);
  };
  const Tensor x = input(c.x, 1, -2, 3);
  const Tensor w = input({c.x[1]}, 2, 0.5, 1.5);
  const Tensor b = input({c.x[1]}, 3, -1, 1);
  testing::ParityOptions options;
  options.atol = atol;
  options.rtol = rtol;
  options.cuda_dtype = dtype;
  const int64_t groups = c.groups;
  return testing::cuda_parity(
      [groups](const std::vector<Tensor>& in) { return group_norm(in[0], groups, in[1], in[2]); }, {x, w, b},
      options);
}

TEST(GroupNormCuda, MatchesCpuAllDTypes) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    EXPECT_TRUE(parity(c, DType::f32, 1e-4, 1e-4)) << "f32 " << shape_str(c.x);
    EXPECT_TRUE(parity(c, DType::f64, 1e-10, 1e-10)) << "f64 " << shape_str(c.x);
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, DType::f16, 3e-2, 2e-2)) << "f16 " << shape_str(c.x);
    EXPECT_TRUE(parity(c, DType::bf16, 1e-1, 5e-2)) << "bf16 " << shape_str(c.x);
  }
}

TEST(GroupNormCuda, ChannelsLastInputStaysChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({2, 8, 5, 6}, 7, -1, 1, DType::f32);
  const Tensor w = testing::random_tensor({8}, 8, 0.5, 1.5, DType::f32);
  Tensor x_cl = Tensor::empty(x.shape(), DType::f32, Device::cuda(0), MemoryFormat::channels_last);
  x_cl.copy_(x);
  x_cl.set_requires_grad(true);
  const Tensor y = group_norm(x_cl, 4, w.to(Device::cuda(0)));
  EXPECT_TRUE(y.is_channels_last());
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu()), group_norm(x, 4, w), 1e-5, 1e-5));
  const Tensor gy = testing::random_tensor(x.shape(), 9, -1, 1, DType::f32);
  y.backward(gy.to(Device::cuda(0)));
  const Tensor x_ref = x.detach().set_requires_grad(true);
  group_norm(x_ref, 4, w).backward(gy);
  EXPECT_TRUE(testing::all_close(x_cl.grad().to(Device::cpu()), x_ref.grad(), 1e-5, 1e-4));
}

}  // namespace
}  // namespace liftoff
