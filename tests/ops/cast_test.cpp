#include "ops/cast/cast.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/reduce/reduce.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Cast, ForwardRoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between two bf16 values and rounds to the even 1.0; 1 + 3 * 2^-8 rounds up to the
  // even 1 + 2^-6. 65504 is f16's largest finite value; 70000 overflows to inf.
  const Tensor x = Tensor::from_vector<float>({1.00390625f, 1.01171875f, -2.5f, 65504.f, 70000.f}, {5});
  const std::vector<float> bf = cast(x, DType::bf16).to_vector<float>();
  EXPECT_EQ(bf[0], 1.0f);
  EXPECT_EQ(bf[1], 1.015625f);
  EXPECT_EQ(bf[2], -2.5f);
  const Tensor h = cast(x, DType::f16);
  EXPECT_EQ(h.dtype(), DType::f16);
  const std::vector<float> hv = h.to_vector<float>();
  EXPECT_EQ(hv[0], 1.00390625f);  // exact in f16 (10 mantissa bits)
  EXPECT_EQ(hv[3], 65504.f);
  EXPECT_TRUE(std::isinf(hv[4]));
  const Tensor d = cast(x, DType::f64);
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(d.to_vector<double>()[1], 1.01171875);
}

TEST(Cast, SameDtypeReturnsInput) {
  const Tensor x = Tensor::from_vector<float>({1.f, 2.f}, {2}).set_requires_grad(true);
  EXPECT_TRUE(cast(x, DType::f32).same(x));
}

TEST(Cast, BackwardCastsGradientBack) {
  const Tensor x = Tensor::from_vector<float>({1.f, -2.f, 3.f}, {3}).set_requires_grad(true);
  const Tensor y = cast(x, DType::f64);
  EXPECT_TRUE(y.requires_grad());
  y.backward(Tensor::from_vector<double>({0.5, 0.25, -4.0}, {3}));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.5f, 0.25f, -4.f}));

  // Through a 16-bit value and back: the gradient arrives in f64.
  const Tensor w = Tensor::from_vector<double>({1.5, -0.75}, {2}).set_requires_grad(true);
  sum(cast(cast(w, DType::bf16), DType::f32)).backward();
  EXPECT_EQ(w.grad().dtype(), DType::f64);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1.0, 1.0}));
}

// Rounding to f32 and back is the identity up to f32 rounding, so central differences with a wide step agree.
TEST(Cast, Gradcheck) {
  const Tensor x = testing::random_tensor({3, 4, 2}, 11).set_requires_grad(true);
  testing::GradcheckOptions options;
  options.eps = 1e-2;
  options.atol = 1e-5;
  options.rtol = 1e-4;
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return cast(cast(in[0], DType::f32), DType::f64); }, {x}, options));
}

TEST(Cast, StridedInputGivesContiguousResultAndGradient) {
  const Tensor base = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad(true);
  const Tensor y = cast(base.permute({1, 0}), DType::f32);
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  y.backward(Tensor::from_vector<float>({10, 40, 20, 50, 30, 60}, {3, 2}));
  EXPECT_EQ(base.grad().to_vector<double>(), (std::vector<double>{10, 20, 30, 40, 50, 60}));
}

TEST(Cast, ToIntegerRecordsNoGradient) {
  const Tensor x = Tensor::from_vector<float>({2.75f, -1.5f}, {2}).set_requires_grad(true);
  const Tensor y = cast(x, DType::i32);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{2, -1}));
}

TEST(Cast, RejectsUndefinedInput) {
  EXPECT_THROW(cast(Tensor(), DType::f32), ValueError);
}

}  // namespace
}  // namespace liftoff
