// A residual block's input on CUDA gets two gradients; the convolution's input gradient, arriving second, is
// added by cuDNN into the one already waiting (beta = 1: the chosen graph plan's accumulating twin, or the
// legacy algorithm). Each engine setting, f32 (NCHW and channels-last) and bf16 autocast, an identity skip
// and a strided 1x1 projection (two convolutions: the second adds into the first's): the sums match the
// CPU's in f64, and a captured step replays them bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>

#include "ops/binary/binary.h"
#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/kernels.h"
#include "ops/relu/relu.h"
#include "runtime/autocast.h"
#include "runtime/graph.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

#if LIFTOFF_WITH_CUDA

// h = relu(x) * 2 feeds a 3x3 convolution and the skip path: x * 3 (identity) or a strided 1x1 convolution.
Tensor block_output(const Tensor& x, const Tensor& w, const Tensor& w_skip, bool projection) {
  const Tensor h = mul(relu(x), 2.0);
  if (!projection) return add(conv2d(h, w, Tensor(), 1, 1), mul(h, 3.0));
  return add(conv2d(h, w, Tensor(), 2, 1), conv2d(h, w_skip, Tensor(), 2, 0));
}

struct Inputs {
  Tensor x = testing::random_tensor({4, 32, 10, 10}, 21);
  Tensor w = testing::random_tensor({32, 32, 3, 3}, 22, -0.1, 0.1);
  Tensor w_skip = testing::random_tensor({32, 32, 1, 1}, 23, -0.3, 0.3);
  Tensor upstream(bool projection) const {
    return testing::random_tensor(projection ? Shape{4, 32, 5, 5} : Shape{4, 32, 10, 10}, 24);
  }
};

// x's gradient in f64 on the CPU.
Tensor cpu_gradient(const Inputs& in, bool projection) {
  const Tensor x = in.x.clone().set_requires_grad(true);
  block_output(x, in.w, in.w_skip, projection).backward(in.upstream(projection));
  return x.grad();
}

enum class Format { nchw, channels_last };

class ResidualSumCuda : public ::testing::TestWithParam<std::tuple<cuda::ConvEngines, DType, Format, bool>> {
 protected:
  void SetUp() override {
    LIFTOFF_REQUIRE_CUDA();
    previous_ = cuda::conv_engines();
    cuda::set_conv_engines(std::get<0>(GetParam()));
  }
  void TearDown() override { cuda::set_conv_engines(previous_); }

  // The weights and the upstream gradient on the GPU (made before any capture).
  struct OnGpu {
    Tensor w, w_skip, upstream;
  };
  OnGpu on_gpu(const Inputs& in) const {
    const Device gpu = Device::cuda(0);
    const Tensor upstream = in.upstream(projection()).to(dtype()).to(gpu);
    return {in.w.to(DType::f32).to(gpu), in.w_skip.to(DType::f32).to(gpu),
            channels_last() ? upstream.contiguous(MemoryFormat::channels_last) : upstream};
  }
  // One backward on CUDA (x in the case's dtype, bf16 under autocast).
  void backward(const Tensor& x, const OnGpu& g) const {
    AutocastGuard autocast(dtype());
    block_output(x, g.w, g.w_skip, projection()).backward(g.upstream);
  }
  static Tensor gradient_f64(const Tensor& x) { return x.grad().to(Device::cpu()).to(DType::f64); }
  Tensor cuda_leaf(const Inputs& in) const {
    const Tensor x = in.x.to(dtype()).to(Device::cuda(0));
    return (channels_last() ? x.contiguous(MemoryFormat::channels_last) : x).set_requires_grad(true);
  }
  DType dtype() const { return std::get<1>(GetParam()); }
  bool channels_last() const { return std::get<2>(GetParam()) == Format::channels_last; }
  bool projection() const { return std::get<3>(GetParam()); }
  // CUDA runs convolutions channels-last: an NCHW input's gradient from the convolution has the other
  // layout than an NCHW skip path's, so the two are summed apart; two convolutions' gradients (the
  // projection) share their layout.
  int64_t expected_additions() const { return channels_last() || projection() ? 1 : 0; }

  cuda::ConvEngines previous_ = cuda::ConvEngines::automatic;
};

TEST_P(ResidualSumCuda, ConvolutionAddsIntoTheWaitingGradient) {
  const Inputs in;
  const OnGpu gpu = on_gpu(in);
  const Tensor x = cuda_leaf(in);
  const int64_t before = cuda::conv_accumulated_input_gradients();
  backward(x, gpu);
  EXPECT_EQ(cuda::conv_accumulated_input_gradients() - before, expected_additions());
  // TF32 for f32; bf16 data and gradients under autocast.
  const double atol = dtype() == DType::bf16 ? 5e-2 : 1e-2, rtol = dtype() == DType::bf16 ? 2e-2 : 1e-2;
  EXPECT_TRUE(testing::all_close(gradient_f64(x), cpu_gradient(in, projection()), atol, rtol));
}

TEST_P(ResidualSumCuda, CapturedStepReplaysTheSum) {
  const Inputs in;
  const OnGpu gpu = on_gpu(in);
  const Tensor x = cuda_leaf(in);
  backward(x, gpu);  // warm-up: searches and the accumulating plans happen outside the capture
  x.set_grad(Tensor());
  backward(x, gpu);
  const Tensor eager = gradient_f64(x);
  x.set_grad(Tensor());
  CudaGraph graph(Device::cuda(0));
  graph.begin_capture();
  backward(x, gpu);
  graph.end_capture();
  for (int replay = 0; replay < 2; ++replay) {
    graph.replay();
    const Tensor replayed = gradient_f64(x);
    EXPECT_EQ(std::memcmp(replayed.raw_data(), eager.raw_data(), eager.nbytes()), 0) << "replay " << replay;
  }
}

std::string case_name(const ::testing::TestParamInfo<ResidualSumCuda::ParamType>& info) {
  const auto [engines, dtype, format, projection] = info.param;
  const std::string engines_name = engines == cuda::ConvEngines::automatic ? "auto"
                                   : engines == cuda::ConvEngines::legacy  ? "legacy"
                                                                           : "graph";
  return engines_name + "_" + dtype_name(dtype) +
         (format == Format::channels_last ? "_channels_last" : "_nchw") +
         (projection ? "_projection" : "_identity");
}

INSTANTIATE_TEST_SUITE_P(Engines, ResidualSumCuda,
                         ::testing::Combine(::testing::Values(cuda::ConvEngines::automatic,
                                                              cuda::ConvEngines::legacy,
                                                              cuda::ConvEngines::graph),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(Format::nchw, Format::channels_last),
                                            ::testing::Bool()),
                         case_name);

// A depthwise convolution's kernels overwrite their output: its input gradient is computed aside and added
// into the waiting one (channels-last f32 and bf16 against the CPU in f64).
TEST(ResidualSumDepthwiseCuda, InputGradientIsAddedAside) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = testing::random_tensor({4, 32, 10, 10}, 31);
  const Tensor w = testing::random_tensor({32, 1, 3, 3}, 32, -0.5, 0.5);
  const Tensor up = testing::random_tensor({4, 32, 10, 10}, 33);
  const auto block = [](const Tensor& in, const Tensor& weight) {
    const Tensor h = mul(relu(in), 2.0);
    return add(conv2d(h, weight, Tensor(), 1, 1, 1, 32), mul(h, 3.0));
  };
  const Tensor xc = x.clone().set_requires_grad(true);
  block(xc, w).backward(up);
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Device gpu = Device::cuda(0);
    const Tensor xd = x.to(dtype).to(gpu).contiguous(MemoryFormat::channels_last).set_requires_grad(true);
    const Tensor wd = w.to(DType::f32).to(gpu);
    const Tensor upd = up.to(dtype).to(gpu).contiguous(MemoryFormat::channels_last);
    {
      AutocastGuard autocast(dtype);
      block(xd, wd).backward(upd);
    }
    const double tol = dtype == DType::bf16 ? 5e-2 : 1e-2;  // TF32 where cuDNN takes an f32 one
    EXPECT_TRUE(testing::all_close(xd.grad().to(Device::cpu()).to(DType::f64), xc.grad(), tol, tol));
  }
}

#else
TEST(ResidualSumCuda, NeedsCuda) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif

}  // namespace
}  // namespace liftoff
