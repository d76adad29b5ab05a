// The own channels-last depthwise conv2d kernels (ops/conv2d/depthwise.h) against the CPU reference: output,
// input, weight and bias gradients for strides 1/2/3, paddings 0-3, kernels 1x1 to 7x7 (square and not), odd
// spatial sizes, channel counts that do and do not allow 16-byte vectors, tiny and MobileNetV2-sized shapes
// (4x4 maps, several channel tiles, enough pixels for the weight gradient's full split and merge), views
// whose data pointer is or is not 16-byte aligned, in f32, bf16 and f16; that the path was taken (and
// LIFTOFF_DEPTHWISE=cudnn turns it off, with the same values); bitwise repeatability and CUDA graph capture.
#include <gtest/gtest.h>

#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/kernels.h"
#include "runtime/autograd.h"
#include "runtime/config.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/graph_capture.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape x;
  int64_t r, s, stride, padding;
  bool bias;
};
const std::vector<Case> kCases = {
    {{2, 8, 9, 8}, 3, 3, 1, 1, true},       // 3x3 fast path, 16-byte vectors in every dtype
    {{2, 12, 9, 7}, 3, 3, 2, 1, false},     // stride 2, odd sizes; C = 12: 4-wide in f32, scalar in half
    {{1, 5, 7, 9}, 3, 3, 1, 0, true},       // C = 5: scalar, no padding
    {{2, 40, 10, 10}, 3, 3, 2, 2, false},   // padding 2
    {{1, 8, 10, 11}, 3, 3, 3, 1, false},    // stride 3
    {{2, 16, 11, 11}, 5, 5, 2, 2, true},    // 5x5 (generic taps)
    {{2, 24, 6, 6}, 1, 1, 1, 0, false},     // 1x1
    {{1, 8, 8, 9}, 3, 5, 1, 1, false},      // non-square kernel
    {{3, 3, 13, 13}, 7, 7, 2, 3, true},     // 7x7, the weight gradient one kernel row per block
    {{2, 144, 16, 16}, 3, 3, 2, 1, false},  // MobileNetV2-like widths
    {{2, 576, 4, 4}, 3, 3, 1, 1, true},
    {{2, 20, 4, 4}, 3, 3, 1, 1, false},   // 4x4; C = 20: 4-wide in f32, scalar in half
    {{2, 24, 4, 4}, 3, 3, 2, 1, true},    // 4x4 stride 2 (2x2 output), 8-wide in half
    {{2, 960, 4, 4}, 3, 3, 2, 1, false},  // several channel tiles of 30 lanes, stride 2
    {{3, 6, 5, 5}, 1, 1, 2, 0, false},    // 1x1 stride 2: C * taps = 6, the merge's partial last quad
    // 18000 output pixels: the weight gradient's full split (264 blocks) and a merge of many partials
    {{20, 32, 30, 30}, 3, 3, 1, 1, false},
};

std::string name_of(const Case& c, DType dtype) {
  return str_cat(dtype_name(dtype), " x ", shape_str(c.x), " kernel ", c.r, "x", c.s, " stride ", c.stride,
                 " padding ", c.padding);
}

struct Result {
  Tensor y, gx, gw, gb;  // on the CPU, f32
};

// Inputs rounded to dtype, so the CPU reference (f32) sees the values the device sees.
struct Inputs {
  Tensor x, w, b, gy;
};
Inputs inputs_for(const Case& c, DType dtype) {
  const int64_t ch = c.x[1];
  auto rounded = [dtype](const Shape& shape, uint64_t seed, double lo, double hi) {
    return testing::random_tensor(shape, seed, lo, hi, DType::f32).to(dtype).to(DType::f32);
  };
  Inputs in;
  in.x = rounded(c.x, 11, -1, 1);
  in.w = rounded({ch, 1, c.r, c.s}, 12, -0.5, 0.5);
  in.b = c.bias ? rounded({ch}, 13, -1, 1) : Tensor();
  const int64_t oh = (c.x[2] + 2 * c.padding - c.r) / c.stride + 1;
  const int64_t ow = (c.x[3] + 2 * c.padding - c.s) / c.stride + 1;
  in.gy = rounded({c.x[0], ch, oh, ow}, 14, -1, 1);
  return in;
}

Tensor run(const Tensor& x, const Tensor& w, const Tensor& b, const Case& c) {
  return conv2d(x, w, b, c.stride, c.padding, 1, c.x[1]);
}

Result cpu_reference(const Case& c, const Inputs& in) {
  const Tensor x = in.x.clone().set_requires_grad(true), w = in.w.clone().set_requires_grad(true);
  const Tensor b = in.b.defined() ? in.b.clone().set_requires_grad(true) : Tensor();
  const Tensor y = run(x, w, b, c);
  y.backward(in.gy);
  return {y, x.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

// The op's own gradients on the device (channels-last input), as it hands them on.
Result on_device(const Case& c, const Inputs& in, DType dtype) {
  const Device cuda = Device::cuda(0);
  auto channels_last = [&](const Tensor& t) {
    Tensor d = Tensor::empty(t.shape(), dtype, cuda, MemoryFormat::channels_last);
    d.copy_(t);
    return d;
  };
  const Tensor x = channels_last(in.x).set_requires_grad(true);
  const Tensor w = in.w.to(cuda, dtype).set_requires_grad(true);
  const Tensor b = in.b.defined() ? in.b.to(cuda, dtype).set_requires_grad(true) : Tensor();
  const Tensor y = run(x, w, b, c);
  EXPECT_TRUE(y.is_channels_last()) << shape_str(y.strides());
  const std::vector<Tensor> grads = y.grad_fn()->apply(channels_last(in.gy));
  EXPECT_TRUE(grads[0].is_channels_last()) << shape_str(grads[0].strides());
  auto host = [](const Tensor& t) { return t.defined() ? t.to(Device::cpu(), DType::f32) : Tensor(); };
  return {host(y), host(grads[0]), host(grads[1]), host(grads[2])};
}

::testing::AssertionResult close(const Result& got, const Result& want, double tol) {
  const std::pair<const char*, std::pair<Tensor, Tensor>> parts[] = {{"output", {got.y, want.y}},
                                                                     {"input gradient", {got.gx, want.gx}},
                                                                     {"weight gradient", {got.gw, want.gw}},
                                                                     {"bias gradient", {got.gb, want.gb}}};
  for (const auto& [what, pair] : parts) {
    if (!pair.second.defined()) continue;
    if (!pair.first.defined()) return ::testing::AssertionFailure() << what << " missing";
    auto r = testing::all_close(pair.first, pair.second, tol, tol);
    if (!r) return ::testing::AssertionFailure() << what << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

double tolerance(DType dtype) {
  // f32: only the summation order differs. Half types: one rounding of each result (8 or 11 bits).
  return dtype == DType::f32 ? 1e-3 : dtype == DType::bf16 ? 1.5e-2 : 2e-3;
}

// How often the own depthwise kernels ran (a CPU-only build has none; its tests skip before asking).
int64_t own_kernel_runs() {
#if LIFTOFF_WITH_CUDA
  return cuda::depthwise_executions();
#else
  return 0;
#endif
}

TEST(Conv2dDepthwiseCuda, MatchesCpuAndTakesTheOwnKernels) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting own(config::Knob::depthwise, "auto");
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& c : kCases) {
      const Inputs in = inputs_for(c, dtype);
      const int64_t before = own_kernel_runs();
      const Result got = on_device(c, in, dtype);
      // forward, input gradient, weight gradient
      EXPECT_EQ(own_kernel_runs() - before, 3) << name_of(c, dtype);
      EXPECT_TRUE(close(got, cpu_reference(c, in), tolerance(dtype))) << name_of(c, dtype);
    }
  }
}

TEST(Conv2dDepthwiseCuda, MisalignedViewsTakeTheScalarPath) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting own(config::Knob::depthwise, "auto");
  const Case c = {{2, 16, 6, 5}, 3, 3, 1, 1, false};  // C = 16: vectors when the pointers allow them
  for (const DType dtype : {DType::f32, DType::bf16}) {
    const Inputs in = inputs_for(c, dtype);
    const Result want = cpu_reference(c, in);
    // One element off: no 16-byte (or 8-byte) alignment; 8 elements off: aligned again.
    for (const int64_t offset : {1, 8}) {
      const Tensor x = testing::channels_last_view(in.x, dtype, offset).set_requires_grad(true);
      ASSERT_TRUE(x.is_channels_last()) << shape_str(x.strides());
      const Tensor w = in.w.to(Device::cuda(0), dtype).set_requires_grad(true);
      const int64_t before = own_kernel_runs();
      const Tensor y = run(x, w, Tensor(), c);
      const std::vector<Tensor> grads = y.grad_fn()->apply(testing::channels_last_view(in.gy, dtype, offset));
      EXPECT_EQ(own_kernel_runs() - before, 3);
      auto host = [](const Tensor& t) { return t.to(Device::cpu(), DType::f32); };
      const Result got = {host(y), host(grads[0]), host(grads[1]), Tensor()};
      EXPECT_TRUE(close(got, want, tolerance(dtype))) << name_of(c, dtype) << " offset " << offset;
    }
  }
}

TEST(Conv2dDepthwiseCuda, CudnnKnobGivesTheSameValues) {
  LIFTOFF_REQUIRE_CUDA();
  for (const Case& c : {kCases[1], kCases[5], kCases[9]}) {
    const Inputs in = inputs_for(c, DType::bf16);
    const Result ours = on_device(c, in, DType::bf16);
    config::ScopedSetting cudnn(config::Knob::depthwise, "cudnn");
    const int64_t before = own_kernel_runs();
    const Result theirs = on_device(c, in, DType::bf16);
    EXPECT_EQ(own_kernel_runs(), before) << "LIFTOFF_DEPTHWISE=cudnn still ran the own kernels";
    EXPECT_TRUE(close(ours, theirs, 2 * tolerance(DType::bf16))) << name_of(c, DType::bf16);
  }
}

TEST(Conv2dDepthwiseCuda, OtherConvolutionsKeepCudnn) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor nhwc = Tensor::empty({2, 8, 9, 9}, DType::bf16, cuda, MemoryFormat::channels_last).fill_(0.5);
  const Tensor nchw = Tensor::full({2, 8, 9, 9}, 0.5, DType::bf16, cuda);
  const Tensor depthwise_w = Tensor::full({8, 1, 3, 3}, 0.25, DType::bf16, cuda);
  const int64_t before = own_kernel_runs();
  {
    // An NCHW input kept in its layout (LIFTOFF_CONV_LAYOUT=input; auto would make it channels-last).
    const config::ScopedSetting layout(config::Knob::conv_layout, "input");
    conv2d(nchw, depthwise_w, Tensor(), 1, 1, 1, 8);
  }
  conv2d(nhwc, depthwise_w, Tensor(), 1, 2, 2, 8);                                           // dilation 2
  conv2d(nhwc, Tensor::full({16, 1, 3, 3}, 0.25, DType::bf16, cuda), Tensor(), 1, 1, 1, 8);  // multiplier 2
  conv2d(nhwc, Tensor::full({8, 2, 3, 3}, 0.25, DType::bf16, cuda), Tensor(), 1, 1, 1, 4);   // groups 4
  EXPECT_EQ(own_kernel_runs(), before);
  conv2d(nhwc, depthwise_w, Tensor(), 1, 1, 1, 8);
  EXPECT_EQ(own_kernel_runs(), before + 1);
}

// Bitwise repeatable and capturable: a MobileNetV2-like shape and the one with the most weight partials.
void expect_repeatable_and_capturable(const Case& c) {
  const Device cuda = Device::cuda(0);
  const Inputs in = inputs_for(c, DType::bf16);
  Tensor x = Tensor::empty(c.x, DType::bf16, cuda, MemoryFormat::channels_last);
  x.copy_(in.x);
  x.set_requires_grad(true);
  const Tensor w = in.w.to(cuda, DType::bf16).set_requires_grad(true);
  const Tensor gy = in.gy.to(cuda, DType::bf16);
  const auto step = [&] {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    const Tensor y = run(x, w, Tensor(), c);
    y.backward(gy);
    return std::vector<Tensor>{y, x.grad(), w.grad()};
  };
  auto host = [](const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(t.to(Device::cpu(), DType::f32));
    return out;
  };
  const std::vector<Tensor> first = host(step());
  const std::vector<Tensor> second = host(step());
  CudaGraph graph(cuda);
  const std::vector<Tensor> captured = testing::capture_into(graph, step);
  graph.replay();
  const std::vector<Tensor> replayed = host(captured);
  for (size_t i = 0; i < first.size(); ++i) {
    // Fixed summation order: bitwise equal, eager or replayed.
    EXPECT_TRUE(testing::all_close(second[i], first[i], 0, 0)) << "tensor " << i << " eager";
    EXPECT_TRUE(testing::all_close(replayed[i], first[i], 0, 0)) << "tensor " << i << " replayed";
  }
}

TEST(Conv2dDepthwiseCuda, RepeatableAndCapturable) {
  LIFTOFF_REQUIRE_CUDA();
  for (const size_t i : {size_t{9}, kCases.size() - 1}) {  // the last case has the most partials
    SCOPED_TRACE(name_of(kCases[i], DType::bf16));
    expect_repeatable_and_capturable(kCases[i]);
  }
}

}  // namespace
}  // namespace liftoff
