// The own channels-last kernels for convolutions with few input channels (ops/conv2d/few_channels.h) against
// the CPU reference: output and weight gradient (and the bias and input gradients the other kernels add) for
// 1-4 input channels, 1-64 filters (multiples of 16 take the vector stores, others the scalar ones), kernels
// 1x1 to 7x7, strides 1-3, paddings, dilation 2, odd sizes, enough pixels for every weight-gradient block to
// take several tiles, and an input view that starts one element into its storage; in f32, bf16 and f16; that
// the path was taken (LIFTOFF_FEW_CHANNEL_CONV=own; auto the forward up to 32 filters and the weight gradient
// up to 16; forward the forward alone; cudnn turns it off, with the same values), that other shapes keep
// cuDNN; bitwise repeatability and CUDA graph capture.
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
  int64_t k, r, s, stride, padding, dilation;
  bool bias, input_grad;
};
const std::vector<Case> kCases = {
    {{2, 3, 17, 15}, 16, 3, 3, 2, 1, 1, false, false},  // the strided CNN's stem, odd sizes
    {{2, 3, 12, 12}, 64, 3, 3, 1, 1, 1, true, false},   // ResNet-18's CIFAR stem, with bias
    {{1, 1, 9, 11}, 5, 3, 3, 1, 0, 1, false, true},     // one channel, 5 filters (scalar stores), input grad
    {{2, 2, 10, 9}, 24, 5, 5, 2, 2, 1, true, false},    // 5x5, 24 filters: one vector and one partial run
    {{1, 4, 8, 8}, 32, 3, 3, 3, 1, 1, false, true},     // 4 channels, stride 3
    {{2, 1, 16, 16}, 16, 7, 7, 2, 3, 1, false, false},  // 7x7 of one channel (49 taps)
    {{1, 3, 13, 11}, 8, 3, 3, 1, 2, 2, false, false},   // dilation 2
    {{3, 4, 6, 7}, 1, 1, 1, 1, 0, 1, true, false},      // 1x1, one filter
    {{2, 3, 7, 7}, 64, 4, 5, 1, 2, 1, false, false},  // 60 taps (non-square kernel), 64 filters: the block's
                                                      // limit
    // 80,000 output pixels: 1,250 tiles of 64 for the weight gradient's 1,024 blocks
    {{2, 3, 200, 200}, 16, 3, 3, 1, 1, 1, false, false},
};

Shape output_shape(const Case& c) {
  const int64_t extent_r = c.dilation * (c.r - 1) + 1, extent_s = c.dilation * (c.s - 1) + 1;
  return {c.x[0], c.k, (c.x[2] + 2 * c.padding - extent_r) / c.stride + 1,
          (c.x[3] + 2 * c.padding - extent_s) / c.stride + 1};
}

std::string name_of(const Case& c, DType dtype) {
  return str_cat(dtype_name(dtype), " x ", shape_str(c.x), " filters ", c.k, " kernel ", c.r, "x", c.s,
                 " stride ", c.stride, " padding ", c.padding, " dilation ", c.dilation);
}

struct Result {
  Tensor y, gx, gw, gb;  // on the CPU, f32
};

// Inputs rounded to dtype, so the CPU reference (f32) sees the values the device sees.
struct Inputs {
  Tensor x, w, b, gy;
};
Inputs inputs_for(const Case& c, DType dtype) {
  auto rounded = [dtype](const Shape& shape, uint64_t seed, double lo, double hi) {
    return testing::random_tensor(shape, seed, lo, hi, DType::f32).to(dtype).to(DType::f32);
  };
  Inputs in;
  in.x = rounded(c.x, 21, -1, 1);
  in.w = rounded({c.k, c.x[1], c.r, c.s}, 22, -0.5, 0.5);
  in.b = c.bias ? rounded({c.k}, 23, -1, 1) : Tensor();
  in.gy = rounded(output_shape(c), 24, -1, 1);
  return in;
}

Tensor run(const Tensor& x, const Tensor& w, const Tensor& b, const Case& c) {
  return conv2d(x, w, b, c.stride, c.padding, c.dilation, 1);
}

Result cpu_reference(const Case& c, const Inputs& in) {
  const Tensor x = in.x.clone().set_requires_grad(c.input_grad), w = in.w.clone().set_requires_grad(true);
  const Tensor b = in.b.defined() ? in.b.clone().set_requires_grad(true) : Tensor();
  const Tensor y = run(x, w, b, c);
  y.backward(in.gy);
  return {y, c.input_grad ? x.grad() : Tensor(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

// The op's own results on the device (channels-last input, `offset` elements into its storage).
Result on_device(const Case& c, const Inputs& in, DType dtype, int64_t offset = 0) {
  const Device cuda = Device::cuda(0);
  const Tensor x = testing::channels_last_view(in.x, dtype, offset).set_requires_grad(c.input_grad);
  const Tensor w = in.w.to(cuda, dtype).set_requires_grad(true);
  const Tensor b = in.b.defined() ? in.b.to(cuda, dtype).set_requires_grad(true) : Tensor();
  const Tensor y = run(x, w, b, c);
  EXPECT_TRUE(y.is_channels_last()) << shape_str(y.strides());
  const std::vector<Tensor> grads = y.grad_fn()->apply(testing::channels_last_view(in.gy, dtype, 0));
  auto host = [](const Tensor& t) { return t.defined() ? t.to(Device::cpu(), DType::f32) : Tensor(); };
  return {host(y), host(grads[0]), host(grads[1]), host(grads[2])};
}

// Own kernels: f32 differs from the CPU only in summation order (sums of up to 80,000 products); half types
// by one rounding of each result.
// The input gradient is cuDNN's (TF32 for f32, as PyTorch's default).
::testing::AssertionResult close(const Result& got, const Result& want, DType dtype) {
  const double own = dtype == DType::f32 ? 1e-3 : dtype == DType::bf16 ? 1.5e-2 : 2e-3;
  const double cudnn = dtype == DType::f32 ? 1e-2 : dtype == DType::bf16 ? 3e-2 : 1e-2;
  const std::tuple<const char*, Tensor, Tensor, double> parts[] = {{"output", got.y, want.y, own},
                                                                   {"input gradient", got.gx, want.gx, cudnn},
                                                                   {"weight gradient", got.gw, want.gw, own},
                                                                   {"bias gradient", got.gb, want.gb, own}};
  for (const auto& [what, mine, theirs, tol] : parts) {
    if (!theirs.defined()) continue;
    if (!mine.defined()) return ::testing::AssertionFailure() << what << " missing";
    auto r = testing::all_close(mine, theirs, tol, tol);
    if (!r) return ::testing::AssertionFailure() << what << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// How often the own kernels ran (a CPU-only build has none; its tests skip before asking).
int64_t own_kernel_runs() {
#if LIFTOFF_WITH_CUDA
  return cuda::few_channel_executions();
#else
  return 0;
#endif
}

TEST(Conv2dFewChannelsCuda, MatchesCpuAndTakesTheOwnKernels) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting own(config::Knob::few_channel_conv, "own");
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& c : kCases) {
      const Inputs in = inputs_for(c, dtype);
      const int64_t before = own_kernel_runs();
      const Result got = on_device(c, in, dtype);
      EXPECT_EQ(own_kernel_runs() - before, 2) << "forward and weight gradient, " << name_of(c, dtype);
      EXPECT_TRUE(close(got, cpu_reference(c, in), dtype)) << name_of(c, dtype);
    }
  }
}

TEST(Conv2dFewChannelsCuda, UnalignedInputView) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting own(config::Knob::few_channel_conv, "own");
  for (const DType dtype : {DType::f32, DType::bf16}) {
    const Case& c = kCases[0];
    const Inputs in = inputs_for(c, dtype);
    const int64_t before = own_kernel_runs();
    EXPECT_TRUE(close(on_device(c, in, dtype, 1), cpu_reference(c, in), dtype)) << name_of(c, dtype);
    EXPECT_EQ(own_kernel_runs() - before, 2);
  }
}

// auto: the own forward up to 32 filters, the own weight gradient up to 16, in every dtype; 64 filters stay
// with cuDNN.
TEST(Conv2dFewChannelsCuda, AutoTakesTheForwardUpTo32FiltersAndTheWeightGradientUpTo16) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting automatic(config::Knob::few_channel_conv, "auto");
  for (const size_t i : {size_t{0}, size_t{4}, size_t{1}}) {  // 16, 32 and 64 filters
    const Case& c = kCases[i];
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      const Inputs in = inputs_for(c, dtype);
      const int64_t before = own_kernel_runs();
      const int64_t own_runs = (c.k <= 32 ? 1 : 0) + (c.k <= 16 ? 1 : 0);
      // cuDNN's f32 is TF32: the half types' tolerance unless both directions are own.
      EXPECT_TRUE(close(on_device(c, in, dtype), cpu_reference(c, in), own_runs == 2 ? dtype : DType::bf16))
          << name_of(c, dtype);
      EXPECT_EQ(own_kernel_runs() - before, own_runs) << name_of(c, dtype);
    }
  }
}

// forward: the own forward alone (every shape that fits), the weight gradient on cuDNN.
TEST(Conv2dFewChannelsCuda, ForwardSettingLeavesTheWeightGradientToCudnn) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting forward_only(config::Knob::few_channel_conv, "forward");
  for (const size_t i : {size_t{0}, size_t{1}, size_t{3}}) {  // 16, 64 (with bias) and 24 filters
    const Case& c = kCases[i];
    for (const DType dtype : {DType::f32, DType::bf16}) {
      const Inputs in = inputs_for(c, dtype);
      const int64_t before = own_kernel_runs();
      // cuDNN's f32 weight gradient is TF32: the half types' tolerance.
      EXPECT_TRUE(close(on_device(c, in, dtype), cpu_reference(c, in), DType::bf16)) << name_of(c, dtype);
      EXPECT_EQ(own_kernel_runs() - before, 1) << "the forward only, " << name_of(c, dtype);
    }
  }
}

TEST(Conv2dFewChannelsCuda, CudnnKnobGivesTheSameValues) {
  LIFTOFF_REQUIRE_CUDA();
  for (const size_t i : {size_t{0}, size_t{3}, size_t{6}}) {
    const Case& c = kCases[i];
    const Inputs in = inputs_for(c, DType::f32);
    const Result ours = [&] {
      config::ScopedSetting own(config::Knob::few_channel_conv, "own");
      return on_device(c, in, DType::f32);
    }();
    config::ScopedSetting cudnn(config::Knob::few_channel_conv, "cudnn");
    const int64_t before = own_kernel_runs();
    const Result theirs = on_device(c, in, DType::f32);
    EXPECT_EQ(own_kernel_runs(), before) << "LIFTOFF_FEW_CHANNEL_CONV=cudnn still ran the own kernels";
    EXPECT_TRUE(close(ours, theirs, DType::bf16)) << "TF32 on cuDNN's side, " << name_of(c, DType::f32);
  }
}

TEST(Conv2dFewChannelsCuda, OtherConvolutionsKeepCudnn) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting own(config::Knob::few_channel_conv, "own");
  const Device cuda = Device::cuda(0);
  auto nhwc = [&](int64_t channels) {
    return Tensor::empty({2, channels, 9, 9}, DType::f32, cuda, MemoryFormat::channels_last).fill_(0.5);
  };
  auto weight = [&](int64_t k, int64_t c, int64_t r) {
    return Tensor::full({k, c, r, r}, 0.25, DType::f32, cuda);
  };
  const int64_t before = own_kernel_runs();
  {
    // An NCHW input kept in its layout (LIFTOFF_CONV_LAYOUT=input; auto would make it channels-last).
    const config::ScopedSetting layout(config::Knob::conv_layout, "input");
    conv2d(Tensor::full({2, 3, 9, 9}, 0.5, DType::f32, cuda), weight(16, 3, 3), Tensor(), 1, 1, 1, 1);
  }
  conv2d(nhwc(5), weight(16, 5, 3), Tensor(), 1, 1, 1, 1);  // 5 input channels
  conv2d(nhwc(3), weight(65, 3, 3), Tensor(), 1, 1, 1, 1);  // 65 filters
  conv2d(nhwc(2), weight(16, 2, 7), Tensor(), 1, 3, 1, 1);  // 98 taps
  conv2d(nhwc(4), weight(16, 2, 3), Tensor(), 1, 1, 1, 2);  // groups 2
  conv2d(Tensor::empty({2, 3, 9, 9}, DType::f64, cuda, MemoryFormat::channels_last).fill_(0.5),
         Tensor::full({16, 3, 3, 3}, 0.25, DType::f64, cuda), Tensor(), 1, 1, 1, 1);  // f64
  EXPECT_EQ(own_kernel_runs(), before);
  conv2d(nhwc(3), weight(16, 3, 3), Tensor(), 1, 1, 1, 1);
  EXPECT_EQ(own_kernel_runs(), before + 1);
}

TEST(Conv2dFewChannelsCuda, RepeatableAndCapturable) {
  LIFTOFF_REQUIRE_CUDA();
  config::ScopedSetting own(config::Knob::few_channel_conv, "own");
  const Device cuda = Device::cuda(0);
  const Case& c = kCases.back();  // the most tiles a block
  const Inputs in = inputs_for(c, DType::f32);
  Tensor x = Tensor::empty(c.x, DType::f32, cuda, MemoryFormat::channels_last);
  x.copy_(in.x);
  const Tensor w = in.w.to(cuda, DType::f32).set_requires_grad(true);
  const Tensor gy = in.gy.to(cuda, DType::f32);
  const auto step = [&] {
    w.set_grad(Tensor());
    const Tensor y = run(x, w, Tensor(), c);
    y.backward(gy);
    return std::vector<Tensor>{y, w.grad()};
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

}  // namespace
}  // namespace liftoff
