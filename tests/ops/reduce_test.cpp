#include "ops/reduce/reduce.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(Reduce, SumAndMean) {
  const Tensor x = Tensor::from_vector<float>({1.f, -2.f, 3.5f, 0.5f, 2.f, 1.f}, {2, 3});
  const Tensor s = sum(x);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_FLOAT_EQ(static_cast<float>(s.item()), 6.f);
  EXPECT_FLOAT_EQ(static_cast<float>(mean(x).item()), 1.f);
}

TEST(Reduce, LargeSumMatchesDoubleReference) {
  // Several chunks, values that do not add exactly in f32.
  const Tensor x = testing::random_tensor({100003}, 9, -1, 1, DType::f32);
  double expected = 0.0;
  for (float v : x.to_vector<float>()) expected += v;
  EXPECT_NEAR(sum(x).item(), expected, 1e-3);
  EXPECT_NEAR(mean(x).item(), expected / 100003.0, 1e-8);
  EXPECT_EQ(sum(x).item(), sum(x).item());
}

TEST(Reduce, Empty) {
  EXPECT_EQ(sum(Tensor::zeros({0})).item(), 0.0);
  EXPECT_TRUE(std::isnan(mean(Tensor::zeros({0}, DType::f64)).item()));
}

TEST(Reduce, Gradcheck) {
  const Tensor x = testing::random_tensor({3, 4}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x}));
}

TEST(Reduce, BackwardValues) {
  const Tensor x = Tensor::zeros({2, 2}, DType::f64).set_requires_grad(true);
  mean(x).backward(Tensor::full({}, 2.0, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>(4, 0.5)));
}

TEST(Reduce, RejectsIntegerInput) {
  EXPECT_THROW(sum(Tensor::zeros({2}, DType::i64)), DTypeError);
  EXPECT_THROW(mean(Tensor::zeros({2}, DType::u8)), DTypeError);
}

}  // namespace
}  // namespace liftoff
