#include <gtest/gtest.h>

#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/kernels.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

struct Case {
  Shape x, w;
  bool bias;
  int64_t stride, padding;
  // Sums over many positions: f16/bf16, and f32 on cuDNN's TF32 tensor cores (PyTorch's default too), round
  // the inputs to 10 or fewer mantissa bits, an error that grows with the sum's length (a 2% weight
  // gradient error at 20,435 terms on the H200), so large cases run in f64 only.
  bool reduced_precision_too = true;
};
// ResNet-20 layer kinds plus odd sizes (batch, channels, rectangular kernel).
const std::vector<Case> kCases = {
    {{4, 3, 16, 16}, {16, 3, 3, 3}, true, 1, 1},
    {{4, 16, 14, 14}, {32, 16, 3, 3}, false, 2, 1},
    {{4, 16, 14, 14}, {32, 16, 1, 1}, false, 2, 0},
    {{3, 5, 9, 7}, {6, 5, 2, 3}, true, 2, 1},
    {{2, 8, 7, 7}, {8, 8, 3, 3}, true, 1, 1},
    // 5 x 61 x 67 = 20,435 output values per channel: the bias gradient splits them into two ranges that
    // cut a plane in the middle.
    {{5, 3, 61, 67}, {4, 3, 3, 3}, true, 1, 1, false},
};

// `reference` is the CPU side's dtype: f32, or f64 for the f64 device run (an f32 reference's rounding over
// the long sums would exceed an f64 tolerance).
::testing::AssertionResult parity(const Case& c, const testing::ParityOptions& options,
                                  DType reference = DType::f32) {
  const Tensor x = testing::random_tensor(c.x, 1, -1, 1, reference).set_requires_grad(true);
  const Tensor w = testing::random_tensor(c.w, 2, -0.5, 0.5, reference).set_requires_grad(true);
  const Tensor b =
      c.bias ? testing::random_tensor({c.w[0]}, 3, -1, 1, reference).set_requires_grad(true) : Tensor();
  const int64_t stride = c.stride, padding = c.padding;
  return testing::cuda_parity(
      [stride, padding](const std::vector<Tensor>& in) {
        return conv2d(in[0], in[1], in[2], stride, padding);
      },
      {x, w, b}, options);
}

TEST(Conv2dCuda, MatchesCpuF32) {
  LIFTOFF_REQUIRE_CUDA();
  testing::ParityOptions options;
  options.atol = 1e-2;  // cuDNN may use TF32 (10-bit mantissa) for f32, as PyTorch does by default
  options.rtol = 1e-2;
  for (const Case& c : kCases) {
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, options)) << shape_str(c.x) << " * " << shape_str(c.w);
  }
}

TEST(Conv2dCuda, MatchesCpuF64) {
  LIFTOFF_REQUIRE_CUDA();
  testing::ParityOptions options;
  options.atol = 1e-9;  // f64 on both sides: only the order of the sums differs
  options.rtol = 1e-9;
  options.cuda_dtype = DType::f64;
  for (const Case& c : kCases) {
    EXPECT_TRUE(parity(c, options, DType::f64)) << shape_str(c.x) << " * " << shape_str(c.w);
  }
}

TEST(Conv2dCuda, MatchesCpuF16) {
  LIFTOFF_REQUIRE_CUDA();
  testing::ParityOptions options;
  options.atol = 3e-2;
  options.rtol = 2e-2;
  options.cuda_dtype = DType::f16;
  for (const Case& c : kCases) {
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, options)) << shape_str(c.x) << " * " << shape_str(c.w);
  }
}

TEST(Conv2dCuda, MatchesCpuBf16) {
  LIFTOFF_REQUIRE_CUDA();
  testing::ParityOptions options;
  options.atol = 1e-1;  // 8-bit mantissa inputs and outputs, f32 accumulation
  options.rtol = 5e-2;
  options.cuda_dtype = DType::bf16;
  for (const Case& c : kCases) {
    if (!c.reduced_precision_too) continue;
    EXPECT_TRUE(parity(c, options)) << shape_str(c.x) << " * " << shape_str(c.w);
  }
}

#if LIFTOFF_WITH_CUDA
// Forces cuDNN's graph-API engines for the convolutions planned in its scope (restores automatic).
struct ForceGraphEngines {
  ForceGraphEngines() { cuda::set_conv_engines(cuda::ConvEngines::graph); }
  ~ForceGraphEngines() { cuda::set_conv_engines(cuda::ConvEngines::automatic); }
};
#endif

// The graph API's plans (normally kept only where they beat the legacy algorithm) give the CPU's values in
// every direction and dtype, and did run.
TEST(Conv2dCuda, GraphApiEnginesMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  const ForceGraphEngines force;
  const int64_t before = cuda::conv_graph_executions();
  struct Kind {
    DType dtype;
    double atol, rtol;
  };
  for (const Kind& k :
       {Kind{DType::f32, 1e-2, 1e-2}, Kind{DType::f16, 3e-2, 2e-2}, Kind{DType::bf16, 1e-1, 5e-2}}) {
    testing::ParityOptions options;
    options.atol = k.atol;
    options.rtol = k.rtol;
    options.cuda_dtype = k.dtype;
    for (const Case& c : kCases) {
      if (!c.reduced_precision_too) continue;
      EXPECT_TRUE(parity(c, options))
          << dtype_name(k.dtype) << " " << shape_str(c.x) << " * " << shape_str(c.w);
    }
  }
  // 3 dtypes x 5-6 shapes x 3 directions; a shape without a graph engine runs the legacy algorithm.
  EXPECT_GT(cuda::conv_graph_executions() - before, 30);
#endif
}

TEST(Conv2dCuda, SecondCallReusesThePlan) {
  // The cached algorithm must serve a later call of the same shape (and a different batch gets its own plan).
  LIFTOFF_REQUIRE_CUDA();
  testing::ParityOptions options;
  options.atol = 1e-2;
  options.rtol = 1e-2;
  for (int repeat = 0; repeat < 2; ++repeat) {
    EXPECT_TRUE(parity(kCases[0], options));
    EXPECT_TRUE(parity({{7, 3, 16, 16}, {16, 3, 3, 3}, true, 1, 1}, options));
  }
}

TEST(Conv2dCuda, RejectsMixedDevices) {
  LIFTOFF_REQUIRE_CUDA();
  const Tensor x = Tensor::zeros({2, 3, 8, 8}, DType::f32, Device::cuda(0));
  const Tensor w = Tensor::zeros({4, 3, 3, 3});
  EXPECT_THROW(conv2d(x, w, Tensor()), DeviceError);
  EXPECT_THROW(conv2d(x, w.to(Device::cuda(0)), Tensor::zeros({4})), DeviceError);
}

}  // namespace
}  // namespace liftoff
