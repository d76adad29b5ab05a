// CUDA grouped/depthwise/dilated conv2d (cuDNN, legacy API with a group count) against the CPU reference, in
// f32/f64/f16/bf16, NCHW and channels-last.
#include <gtest/gtest.h>

#include "ops/conv2d/conv2d.h"
#include "runtime/autograd.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape x, w;
  bool bias;
  int64_t stride, padding, dilation, groups;
};
const std::vector<Case> kCases = {
    {{2, 4, 7, 7}, {6, 2, 3, 3}, true, 1, 1, 1, 2},      // two groups
    {{2, 8, 9, 8}, {8, 1, 3, 3}, true, 1, 1, 1, 8},      // depthwise
    {{2, 8, 10, 10}, {16, 1, 3, 3}, false, 2, 1, 1, 8},  // depthwise multiplier 2, stride 2
    {{2, 3, 9, 8}, {4, 3, 3, 3}, true, 1, 2, 2, 1},      // dilation
    {{1, 6, 10, 10}, {6, 2, 3, 3}, false, 2, 2, 2, 3},   // groups, stride, dilation
};

Tensor run(const std::vector<Tensor>& in, const Case& c) {
  return conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups);
}

::testing::AssertionResult parity(const Case& c, DType dtype, double atol, double rtol) {
  const DType reference = dtype == DType::f64 ? DType::f64 : DType::f32;
  const Tensor x = testing::random_tensor(c.x, 1, -1, 1, reference).set_requires_grad(true);
  const Tensor w = testing::random_tensor(c.w, 2, -0.5, 0.5, reference).set_requires_grad(true);
  const Tensor b =
      c.bias ? testing::random_tensor({c.w[0]}, 3, -1, 1, reference).set_requires_grad(true) : Tensor();
  testing::ParityOptions options;
  options.atol = atol;
  options.rtol = rtol;
  options.cuda_dtype = dtype;
  return testing::cuda_parity([c](const std::vector<Tensor>& in) { return run(in, c); }, {x, w, b}, options);
}

TEST(Conv2dGroupsCuda, MatchesCpuAllDTypes) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    // f32 may run TF32 in cuDNN, as PyTorch by default.
    EXPECT_TRUE(parity(c, DType::f32, 1e-2, 1e-2)) << "f32 " << shape_str(c.x) << " " << shape_str(c.w);
    EXPECT_TRUE(parity(c, DType::f64, 1e-9, 1e-9)) << "f64 " << shape_str(c.x) << " " << shape_str(c.w);
    EXPECT_TRUE(parity(c, DType::f16, 3e-2, 2e-2)) << "f16 " << shape_str(c.x) << " " << shape_str(c.w);
    EXPECT_TRUE(parity(c, DType::bf16, 1e-1, 5e-2)) << "bf16 " << shape_str(c.x) << " " << shape_str(c.w);
  }
}

TEST(Conv2dGroupsCuda, ChannelsLastStaysChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const Case& c : kCases) {
      // The CPU sees the values the device sees (rounded to dtype), in f32 NCHW.
      const Tensor x = testing::random_tensor(c.x, 4, -1, 1, DType::f32).to(dtype).to(DType::f32);
      const Tensor w = testing::random_tensor(c.w, 5, -0.5, 0.5, DType::f32).to(dtype).to(DType::f32);
      Tensor xd = Tensor::empty(c.x, dtype, cuda, MemoryFormat::channels_last);
      xd.copy_(x);
      xd.set_requires_grad(true);
      const Tensor wd = w.to(cuda, dtype).set_requires_grad(true);
      const Tensor x_ref = x.clone().set_requires_grad(true), w_ref = w.clone().set_requires_grad(true);
      const Tensor y = run({xd, wd, Tensor()}, c);
      const Tensor y_ref = run({x_ref, w_ref, Tensor()}, c);
      EXPECT_TRUE(y.is_channels_last()) << shape_str(y.strides());
      const double tol = dtype == DType::f32 ? 1e-2 : 5e-2;
      EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), y_ref, tol, tol)) << dtype_name(dtype);
      const Tensor gy = testing::random_tensor(y_ref.shape(), 6, -1, 1, DType::f32).to(dtype).to(DType::f32);
      y_ref.backward(gy);
      // The op's own gradients, as it hands them on (a leaf's .grad takes the leaf's layout anyway).
      Tensor gy_dev = Tensor::empty(y.shape(), dtype, cuda, MemoryFormat::channels_last);
      gy_dev.copy_(gy);
      const std::vector<Tensor> grads = y.grad_fn()->apply(gy_dev);
      EXPECT_TRUE(grads[0].is_channels_last()) << shape_str(grads[0].strides());
      EXPECT_TRUE(testing::all_close(grads[0].to(Device::cpu(), DType::f32), x_ref.grad(), tol, tol));
      EXPECT_TRUE(testing::all_close(grads[1].to(Device::cpu(), DType::f32), w_ref.grad(), 2 * tol, tol));
    }
  }
}

}  // namespace
}  // namespace liftoff
