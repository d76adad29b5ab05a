// The Winograd kernels of the CPU conv2d (ops/conv2d/winograd.h), called directly (so they run also where
// conv2d itself would not pick them), against the exact f64 path on random inputs, for the ResNet-20 map
// sizes, odd sizes and partial blocks: the F(2x2, 3x3) forward (any host) and the F(4x4, 3x3) input and
// weight gradients (AVX-512 hosts).
#include "ops/conv2d/winograd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/conv2d/conv2d.h"
#include "runtime/autograd.h"
#include "runtime/parallel.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// max |actual - expected| / max |expected|: the golden test's measure.
double relative_error(const std::vector<float>& actual, const Tensor& expected) {
  const std::vector<double> e = expected.to_vector<double>();
  EXPECT_EQ(actual.size(), e.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(actual.size(), e.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(actual[i]) - e[i]));
    scale = std::max(scale, std::abs(e[i]));
  }
  return diff / std::max(scale, 1e-30);
}

struct Case {
  int64_t n, c, k, h, w;
};

// f32 Winograd against f64 exact, as max |error| / max |exact| over each result (the golden test's measure).
// Inputs in [-1, 1); measured errors are 2e-7 to 7e-7 for F(2x2, 3x3) (it rounds about like a direct f32 sum)
// and up to 1e-5 for F(4x4, 3x3) (transform entries up to 8 and 1/24), so the limits leave a wide margin
// while still catching a wrong tile, edge or block (those give errors near 1).
constexpr double kTol = 2e-5;
constexpr double kTolF4 = 5e-5;

// The forward, and with `gradients` the F(4x4) input and weight gradients.
void check(const Case& cs, int threads, bool gradients) {
  set_num_threads(threads);
  const Conv2dShape g{cs.n, cs.c, cs.h, cs.w, cs.k, 3, 3, cs.h, cs.w, 1, 1, false};
  ASSERT_TRUE(cpu::winograd::supports(g));
  const Tensor x64 = testing::random_tensor({cs.n, cs.c, cs.h, cs.w}, 101).set_requires_grad(true);
  const Tensor w64 = testing::random_tensor({cs.k, cs.c, 3, 3}, 102).set_requires_grad(true);
  const Tensor b64 = testing::random_tensor({cs.k}, 103);
  const Tensor gy64 = testing::random_tensor({cs.n, cs.k, cs.h, cs.w}, 104);
  const Tensor y64 = conv2d(x64, w64, b64, 1, 1);
  y64.backward(gy64);

  const std::vector<float> x = x64.detach().to(DType::f32).to_vector<float>();
  const std::vector<float> w = w64.detach().to(DType::f32).to_vector<float>();
  const std::vector<float> b = b64.to(DType::f32).to_vector<float>();
  const std::vector<float> gy = gy64.to(DType::f32).to_vector<float>();
  const std::string what = "n=" + std::to_string(cs.n) + " c=" + std::to_string(cs.c) +
                           " k=" + std::to_string(cs.k) + " " + std::to_string(cs.h) + "x" +
                           std::to_string(cs.w) + " threads=" + std::to_string(threads);
  std::vector<float> y(static_cast<size_t>(cs.n * cs.k * cs.h * cs.w), NAN);
  cpu::winograd::forward(x.data(), w.data(), b.data(), y.data(), g);
  EXPECT_LE(relative_error(y, y64), kTol) << "forward " << what;
  if (!gradients) return;
  std::vector<float> gx(x.size(), NAN), gw(w.size(), NAN);
  cpu::winograd::f4::input_grad(gy.data(), w.data(), gx.data(), g);
  cpu::winograd::f4::weight_grad(x.data(), gy.data(), gw.data(), g);
  EXPECT_LE(relative_error(gx, x64.grad()), kTolF4) << "input gradient " << what;
  EXPECT_LE(relative_error(gw, w64.grad()), kTolF4) << "weight gradient " << what;
}

std::vector<Case> winograd_cases() {
  return {
      {3, 16, 16, 28, 28},   // ResNet-20 stage 1; a block spans images
      {1, 32, 32, 14, 14},   // stage 2, batch 1
      {3, 64, 64, 7, 7},     // stage 3: odd size, last tile row and column half outside
      {1, 8, 12, 9, 5},      // odd, non-square, K != C
      {3, 12, 8, 6, 11},     //
      {1, 8, 8, 1, 1},       // a single pixel
      {2, 9, 10, 2, 3},      //
      {40, 16, 16, 14, 14},  // several blocks per thread, a partial last block
      {2, 8, 8, 5, 61},      // wide: 31 tiles a row, three vectors of the AVX-512 input transform
      {2, 8, 20, 13, 10},    // K > 16: two channel vectors in F(4x4)'s gradient transform
  };
}

TEST(Conv2dWinograd, MatchesExactPath) {
  for (bool portable : {false, true}) {
    // The AVX-512 forward transforms where the CPU has them, then the portable ones.
    cpu::winograd::use_portable_transforms(portable);
    for (int threads : {1, 2, 3}) {
      for (const Case& cs : winograd_cases()) check(cs, threads, false);
    }
  }
  cpu::winograd::use_portable_transforms(false);
  set_num_threads(2);
}

TEST(Conv2dWinograd, F4GradientsMatchExactPath) {
  if (!cpu::winograd::f4::available()) {
    GTEST_SKIP()
        << "the F(4x4, 3x3) gradients need AVX-512, which this CPU lacks (the exact path runs instead)";
  }
  for (int threads : {1, 2, 3}) {
    for (const Case& cs : winograd_cases()) check(cs, threads, true);
  }
  set_num_threads(2);
}

TEST(Conv2dWinograd, Supports) {
  EXPECT_TRUE(cpu::winograd::supports({2, 16, 8, 8, 16, 3, 3, 8, 8, 1, 1}));
  EXPECT_FALSE(cpu::winograd::supports({2, 1, 28, 28, 16, 3, 3, 28, 28, 1, 1}));   // the 1-channel stem
  EXPECT_FALSE(cpu::winograd::supports({2, 16, 28, 28, 32, 3, 3, 14, 14, 2, 1}));  // stride 2
  EXPECT_FALSE(cpu::winograd::supports({2, 16, 8, 8, 16, 5, 5, 8, 8, 1, 2}));      // 5x5
  EXPECT_FALSE(cpu::winograd::supports({2, 16, 8, 8, 16, 3, 3, 6, 6, 1, 0}));      // valid, not same
}

}  // namespace
}  // namespace liftoff
