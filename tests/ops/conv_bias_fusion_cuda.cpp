// A user's relu folded into a convolution's bias add on CUDA (ops/conv2d/fusion.h,
// LIFTOFF_CONV_BIAS_RELU=auto), checked against the unfused CPU reference (values and every gradient), bit
// for bit against the unfused CUDA pair, and that the fold happened, or did not where it must not.
#include <gtest/gtest.h>

#include "ops/binary/binary.h"
#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/kernels.h"
#include "ops/reduce/reduce.h"
#include "ops/relu/relu.h"
#include "runtime/autograd.h"
#include "runtime/config.h"
#include "runtime/determinism.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

Tensor rnd(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  return testing::random_tensor(shape, seed, lo, hi, DType::f32);
}

const testing::ParityOptions kTol{/*atol=*/2e-3, /*rtol=*/1e-3};

// ReLUs folded into bias adds so far (a CPU-only build has none; its tests skip before asking).
int64_t folds_so_far() {
#if LIFTOFF_WITH_CUDA
  return cuda::conv_bias_relu_folds();
#else
  return 0;
#endif
}

struct FusionOn {
  config::ScopedSetting setting{config::Knob::conv_bias_relu, "auto"};
};

// cuDNN's reproducible algorithms only, for comparisons bit for bit; restores the mode on destruction.
struct DeterministicScope {
  const bool previous = deterministic_algorithms();
  DeterministicScope() { set_deterministic_algorithms(true); }
  ~DeterministicScope() { set_deterministic_algorithms(previous); }
};

TEST(ConvBiasFusionCuda, ReluFoldsIntoTheBiasAdd) {
  LIFTOFF_REQUIRE_CUDA();
  const FusionOn on;
  auto fn = [](const std::vector<Tensor>& t) { return relu(conv2d(t[0], t[1], t[2], 1, 1)); };
  // Biases of both signs around the convolution's spread: a good share of outputs on each side of zero.
  const std::vector<Tensor> in{rnd({4, 6, 7, 7}, 1).set_requires_grad(true),
                               rnd({10, 6, 3, 3}, 2, -0.3, 0.3).set_requires_grad(true),
                               rnd({10}, 3).set_requires_grad(true)};
  const int64_t folds = folds_so_far();
  EXPECT_TRUE(testing::cuda_parity(fn, in, kTol));
  EXPECT_GT(folds_so_far(), folds);
  // f64 convolutions stay NCHW: the fold's other indexing.
  auto fn64 = [](const std::vector<Tensor>& t) {
    return relu(conv2d(t[0].to(DType::f64), t[1].to(DType::f64), t[2].to(DType::f64), 2, 1));
  };
  const int64_t folds32 = folds_so_far();
  EXPECT_TRUE(testing::cuda_parity(fn64, in, {1e-6, 1e-5}));  // the leaves' gradients are f32
  EXPECT_GT(folds_so_far(), folds32);
}

// The fold against the unfused pair on the device, forward and every gradient: the same bits (f32 and bf16).
TEST(ConvBiasFusionCuda, FoldedAndUnfusedAgreeBitForBit) {
  LIFTOFF_REQUIRE_CUDA();
  const DeterministicScope deterministic;
  const Shape shape{8, 16, 12, 12};
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto run = [&](const char* setting) {
      const config::ScopedSetting s(config::Knob::conv_bias_relu, setting);
      const Device cuda = Device::cuda();
      const Tensor x = rnd(shape, 11).to(cuda, dtype).set_requires_grad(true);
      const Tensor w = rnd({24, 16, 3, 3}, 12, -0.2, 0.2).to(cuda, dtype).set_requires_grad(true);
      const Tensor b = rnd({24}, 13).to(cuda, dtype).set_requires_grad(true);
      const Tensor y = relu(conv2d(x, w, b, 1, 1));
      y.backward(rnd(y.shape(), 14).to(cuda, dtype));
      return std::vector<Tensor>{y.to(Device::cpu(), DType::f32), x.grad().to(Device::cpu(), DType::f32),
                                 w.grad().to(Device::cpu(), DType::f32),
                                 b.grad().to(Device::cpu(), DType::f32)};
    };
    const int64_t folds = folds_so_far();
    const std::vector<Tensor> unfused = run("off");
    EXPECT_EQ(folds_so_far(), folds);
    const std::vector<Tensor> folded = run("auto");
    EXPECT_EQ(folds_so_far(), folds + 1);
    for (size_t i = 0; i < folded.size(); ++i) {
      EXPECT_TRUE(testing::all_close(folded[i], unfused[i], 0, 0)) << "output / gradient " << i;
    }
  }
}

// An output read by someone else (kept, viewed, used twice) reads as conv + bias, and the fold stays right.
TEST(ConvBiasFusionCuda, AKeptOutputStillReadsWithItsBias) {
  LIFTOFF_REQUIRE_CUDA();
  const FusionOn on;
  const Tensor x = rnd({2, 3, 5, 5}, 21), w = rnd({4, 3, 3, 3}, 22), b = rnd({4}, 23);
  const Tensor expected_y = conv2d(x, w, b, 1, 1);
  const Device cuda = Device::cuda();
  const Tensor y = conv2d(x.to(cuda), w.to(cuda), b.to(cuda), 1, 1);
  const Tensor z = relu(y);  // folded: y itself stays without its bias until read
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu()), expected_y, 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(z.to(Device::cpu()), relu(expected_y), 1e-4, 1e-4));
  // relu(y) + y: y is read by the add after the fold; and relu of an issued output takes the ordinary path.
  auto twice = [](const std::vector<Tensor>& t) {
    const Tensor v = conv2d(t[0], t[1], t[2], 1, 1);
    return relu(v) + v * 2.0;
  };
  auto view = [](const std::vector<Tensor>& t) {
    return relu(conv2d(t[0], t[1], t[2], 1, 1).slice(1, 0, 2));
  };
  const std::vector<Tensor> in{x.detach().set_requires_grad(true), w.detach().set_requires_grad(true),
                               b.detach().set_requires_grad(true)};
  EXPECT_TRUE(testing::cuda_parity(twice, in, kTol));
  const int64_t folds = folds_so_far();
  EXPECT_TRUE(testing::cuda_parity(view, in, kTol));
  EXPECT_EQ(folds_so_far(), folds) << "a view of the output must not fold";
}

}  // namespace
}  // namespace liftoff
