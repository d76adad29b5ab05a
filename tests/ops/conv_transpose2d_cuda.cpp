// CUDA conv_transpose2d (cuDNN backward-data) against the CPU reference, in f32/f64/f16/bf16, NCHW and
// channels-last, and under autocast.
#include <gtest/gtest.h>

#include "ops/conv_transpose2d/conv_transpose2d.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape x, w;
  bool bias;
  int64_t stride, padding, output_padding, groups, dilation;
};
const std::vector<Case> kCases = {
    {{2, 3, 4, 5}, {3, 2, 3, 3}, true, 1, 0, 0, 1, 1},  {{2, 8, 6, 6}, {8, 4, 3, 3}, true, 2, 1, 1, 1, 1},
    {{1, 4, 5, 6}, {4, 4, 4, 4}, false, 2, 1, 0, 1, 1}, {{2, 4, 5, 5}, {4, 2, 3, 3}, true, 2, 1, 1, 2, 1},
    {{1, 6, 7, 7}, {6, 1, 3, 3}, false, 1, 1, 0, 6, 1}, {{1, 2, 5, 6}, {2, 3, 3, 3}, true, 2, 2, 1, 1, 2},
};

Tensor run(const std::vector<Tensor>& in, const Case& c) {
  return conv_transpose2d(in[0], in[1], in[2], c.stride, c.padding, c.output_padding, c.groups, c.dilation);
}

::testing::AssertionResult parity(const Case& c, DType dtype, double atol, double rtol) {
  const DType reference = dtype == DType::f64 ? DType::f64 : DType::f32;
  const Tensor x = testing::random_tensor(c.x, 1, -1, 1, reference).set_requires_grad(true);
  const Tensor w = testing::random_tensor(c.w, 2, -0.5, 0.5, reference).set_requires_grad(true);
  const Tensor b =
      c.bias ? testing::random_tensor({c.w[1] * c.groups}, 3, -1, 1, reference).set_requires_grad(true)
             : Tensor();
  testing::ParityOptions options;
  options.atol = atol;
  options.rtol = rtol;
  options.cuda_dtype = dtype;
  return testing::cuda_parity([c](const std::vector<Tensor>& in) { return run(in, c); }, {x, w, b}, options);
}

TEST(ConvTranspose2dCuda, MatchesCpuAllDTypes) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    EXPECT_TRUE(parity(c, DType::f32, 1e-2, 1e-2)) << "f32 " << shape_str(c.x) << " " << shape_str(c.w);
    EXPECT_TRUE(parity(c, DType::f64, 1e-9, 1e-9)) << "f64 " << shape_str(c.x) << " " << shape_str(c.w);
    EXPECT_TRUE(parity(c, DType::f16, 3e-2, 2e-2)) << "f16 " << shape_str(c.x) << " " << shape_str(c.w);
    EXPECT_TRUE(parity(c, DType::bf16, 1e-1, 5e-2)) << "bf16 " << shape_str(c.x) << " " << shape_str(c.w);
  }
}

TEST(ConvTranspose2dCuda, ChannelsLastStaysChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  for (const Case& c : kCases) {
    const Tensor x = testing::random_tensor(c.x, 4, -1, 1, DType::f32).to(DType::f16).to(DType::f32);
    const Tensor w = testing::random_tensor(c.w, 5, -0.5, 0.5, DType::f32).to(DType::f16).to(DType::f32);
    Tensor xd = Tensor::empty(c.x, DType::f16, cuda, MemoryFormat::channels_last);
    xd.copy_(x);
    xd.set_requires_grad(true);
    const Tensor wd = w.to(cuda, DType::f16).set_requires_grad(true);
    const Tensor x_ref = x.clone().set_requires_grad(true), w_ref = w.clone().set_requires_grad(true);
    const Tensor y = run({xd, wd, Tensor()}, c);
    const Tensor y_ref = run({x_ref, w_ref, Tensor()}, c);
    EXPECT_TRUE(y.is_channels_last()) << shape_str(y.strides());
    EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), y_ref, 3e-2, 2e-2));
    const Tensor gy =
        testing::random_tensor(y_ref.shape(), 6, -1, 1, DType::f32).to(DType::f16).to(DType::f32);
    y_ref.backward(gy);
    // The op's own gradients, as it hands them on (a leaf's .grad takes the leaf's layout anyway).
    Tensor gy_dev = Tensor::empty(y.shape(), DType::f16, cuda, MemoryFormat::channels_last);
    gy_dev.copy_(gy);
    const std::vector<Tensor> grads = y.grad_fn()->apply(gy_dev);
    EXPECT_TRUE(grads[0].is_channels_last()) << shape_str(grads[0].strides());
    EXPECT_TRUE(testing::all_close(grads[0].to(Device::cpu(), DType::f32), x_ref.grad(), 3e-2, 2e-2));
    EXPECT_TRUE(testing::all_close(grads[1].to(Device::cpu(), DType::f32), w_ref.grad(), 1e-1, 2e-2));
  }
}

TEST(ConvTranspose2dCuda, AutocastRunsInHalf) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({2, 4, 5, 5}, 7, -1, 1, DType::f32);
  const Tensor w = testing::random_tensor({4, 3, 3, 3}, 8, -0.5, 0.5, DType::f32);
  AutocastGuard autocast(DType::bf16);
  const Tensor y = conv_transpose2d(x.to(Device::cuda(0)), w.to(Device::cuda(0)), Tensor(), 2, 1, 1);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), conv_transpose2d(x, w, Tensor(), 2, 1, 1),
                                 1e-1, 5e-2));
}

// A bf16 activation meeting an f32 weight (a functional call under autocast) runs in bf16, as in PyTorch.
TEST(ConvTranspose2dCuda, AutocastCastsAnF32WeightForAHalfInput) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({2, 4, 5, 5}, 7, -1, 1, DType::f32);
  const Tensor w = testing::random_tensor({4, 3, 3, 3}, 8, -0.5, 0.5, DType::f32);
  AutocastGuard autocast(DType::bf16);
  const Tensor y =
      conv_transpose2d(x.to(Device::cuda(0), DType::bf16), w.to(Device::cuda(0)), Tensor(), 2, 1, 1);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), conv_transpose2d(x, w, Tensor(), 2, 1, 1),
                                 1e-1, 5e-2));
}

}  // namespace
}  // namespace liftoff
