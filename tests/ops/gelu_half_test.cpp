// The gelu form that 16-bit CUDA storage computes with (ops/unary/functors.h, GeluHalf: erfc through a
// degree-9 polynomial in the exponent), checked on the host in f32 against the exact erf form in f64: every
// finite bf16 value and a fine sweep, value and derivative, far inside the rounding of bf16 (2^-9 relative)
// and f16 (2^-12 below its half ulp), and the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ops/unary/functors.h"

namespace liftoff {
namespace {

double exact_gelu(double x) {
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));  // erfc keeps the left tail's relative precision
}

double exact_gelu_grad(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

float from_bf16_bits(uint16_t bits) {
  const uint32_t word = uint32_t{bits} << 16;
  float value = 0.0f;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

// The relative error the fit promises (< 5e-5; f16 keeps 2^-11, bf16 2^-8), with an absolute floor below
// bf16's smallest normal value (subnormal results carry less precision).
constexpr double kRelative = 1e-4;
constexpr double kFloor = 1e-37;

TEST(GeluHalf, EveryFiniteBf16ValueMatchesTheExactErfForm) {
  const unary::GeluHalf gelu;
  int checked = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float x = from_bf16_bits(static_cast<uint16_t>(bits));
    if (!std::isfinite(x)) continue;
    const double expected = exact_gelu(x);
    const double got = gelu(x);
    ASSERT_LE(std::fabs(got - expected), kRelative * std::fabs(expected) + kFloor) << "x = " << x;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 256);  // all but exponent 0xff: 2 infinities and 254 NaNs
}

TEST(GeluHalf, FineSweepValueAndDerivative) {
  const unary::GeluHalf gelu;
  for (int i = -200000; i <= 200000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;  // [-20, 20]
    const double expected = exact_gelu(x);
    ASSERT_LE(std::fabs(gelu(x) - expected), kRelative * std::fabs(expected) + kFloor) << "x = " << x;
    // The derivative crosses zero near x = -0.75 (Phi + x pdf cancel): an absolute part for Phi's error.
    const double slope = exact_gelu_grad(x);
    ASSERT_LE(std::fabs(gelu.grad(x) - slope), kRelative * std::fabs(slope) + 1e-5) << "x = " << x;
  }
}

TEST(GeluHalf, SpecialValuesFollowTheErfForm) {
  const unary::GeluHalf gelu;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(gelu(inf), inf);
  EXPECT_TRUE(std::isnan(gelu(-inf)));  // -inf * 0, as 0.5 x (1 + erf(x / sqrt 2))
  EXPECT_TRUE(std::isnan(gelu(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(gelu(0.0f), 0.0f);
  EXPECT_EQ(gelu.grad(0.0f), 0.5f);
  EXPECT_EQ(gelu(-16.0f), 0.0f);  // past the fit's range: exactly zero (as the exact value in f32)
  EXPECT_EQ(gelu(-1e30f), 0.0f);
}

}  // namespace
}  // namespace liftoff
