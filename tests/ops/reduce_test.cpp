#include "ops/reduce/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using Values = std::vector<double>;
using Indices = std::vector<int64_t>;

Tensor t(const Values& values, const Shape& shape) {
  return Tensor::from_vector<double>(values, shape);
}

// [2, 3, 2] of unsorted values.
Tensor cube() {
  return t({3, 1, 4, 1.5, 5, 9, 2, 6, 5.5, 3.5, 8, 7}, {2, 3, 2});
}

TEST(Reduce, SumAndMean) {
  const Tensor x = Tensor::from_vector<float>({1.f, -2.f, 3.5f, 0.5f, 2.f, 1.f}, {2, 3});
  const Tensor s = sum(x);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_FLOAT_EQ(static_cast<float>(s.item()), 6.f);
  EXPECT_FLOAT_EQ(static_cast<float>(mean(x).item()), 1.f);
}

TEST(Reduce, SumOverDims) {
  const Tensor x = cube();
  EXPECT_EQ(sum(x, {0}).shape(), (Shape{3, 2}));
  EXPECT_EQ(sum(x, {0}).to_vector<double>(), (Values{5, 7, 9.5, 5, 13, 16}));
  EXPECT_EQ(sum(x, {-1}).to_vector<double>(), (Values{4, 5.5, 14, 8, 9, 15}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(sum(x, {1}, true).to_vector<double>(), (Values{12, 11.5, 15.5, 16.5}));
  EXPECT_EQ(sum(x, {0, 2}).to_vector<double>(), (Values{12, 14.5, 29}));  // non-adjacent dims
  EXPECT_EQ(sum(x, {2, 0}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(sum(x, {}).shape(), Shape{});
  EXPECT_EQ(sum(x, {}).item(), 55.5);
  EXPECT_TRUE(testing::all_close(mean(x, {0, 1}), t({27.5 / 6, 28.0 / 6}, {2}), 1e-15, 0));
  EXPECT_EQ(sum(t({4}, {}), {0}).item(), 4);  // 0-d
}

TEST(Reduce, NonContiguousInput) {
  const Tensor x = cube().permute({2, 0, 1});  // [2, 2, 3]
  EXPECT_EQ(sum(x, {2}).to_vector<double>(), (Values{12, 15.5, 11.5, 16.5}));
  EXPECT_EQ(sum(cube().slice(1, 1, 3), {1}).to_vector<double>(), (Values{9, 10.5, 13.5, 10.5}));
}

TEST(Reduce, LargeSumMatchesDoubleReference) {
  // Several chunks, values that do not add exactly in f32.
  const Tensor x = testing::random_tensor({100003}, 9, -1, 1, DType::f32);
  double expected = 0.0;
  for (float v : x.to_vector<float>()) expected += v;
  EXPECT_NEAR(sum(x).item(), expected, 1e-3);
  EXPECT_NEAR(mean(x).item(), expected / 100003.0, 1e-8);
  EXPECT_EQ(sum(x).item(), sum(x).item());
  // The same over a leading dimension of many chunks (columns).
  const Tensor cols = x.slice(0, 0, 100000).view({50000, 2});
  const Values by_column = sum(cols, {0}).to_vector<double>();
  double even = 0.0;
  const std::vector<float> v = x.to_vector<float>();
  for (size_t i = 0; i < 100000; i += 2) even += v[i];
  EXPECT_NEAR(by_column[0], even, 1e-3);
}

TEST(Reduce, Empty) {
  EXPECT_EQ(sum(Tensor::zeros({0})).item(), 0.0);
  EXPECT_TRUE(std::isnan(mean(Tensor::zeros({0}, DType::f64)).item()));
  EXPECT_EQ(sum(Tensor::zeros({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(sum(Tensor::zeros({3, 0}), {0}).shape(), (Shape{0}));
  EXPECT_EQ(logsumexp(Tensor::zeros({2, 0}, DType::f64), {1}).to_vector<double>(),
            (Values{-INFINITY, -INFINITY}));
  EXPECT_THROW(max(Tensor::zeros({2, 0}), 1), ShapeError);
  EXPECT_THROW(amax(Tensor::zeros({0})), ShapeError);
}

TEST(Reduce, MaxMinAlongADim) {
  const Tensor x = cube();
  const auto [values, indices] = max(x, 1);
  EXPECT_EQ(values.shape(), (Shape{2, 2}));
  EXPECT_EQ(indices.dtype(), DType::i64);
  EXPECT_EQ(values.to_vector<double>(), (Values{5, 9, 8, 7}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (Indices{2, 2, 2, 2}));
  const auto [mv, mi] = min(x, -1, true);
  EXPECT_EQ(mv.shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(mv.to_vector<double>(), (Values{1, 1.5, 5, 2, 3.5, 7}));
  EXPECT_EQ(mi.to_vector<int64_t>(), (Indices{1, 1, 0, 0, 1, 1}));
  // Ties pick the first index; NaN is the maximum and the minimum.
  const double nan = std::nan("");
  EXPECT_EQ(max(t({1, 3, 3, 2}, {4}), 0).second.item(), 1);
  EXPECT_EQ(max(t({1, nan, 3, nan}, {4}), 0).second.item(), 1);
  EXPECT_TRUE(std::isnan(min(t({1, nan, 3}, {3}), 0).first.item()));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (Indices{0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(argmin(x, 2, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(argmax(x).item(), 5);  // the flattened index of 9
  EXPECT_EQ(argmin(x).item(), 1);
}

TEST(Reduce, MaxAlongADimGradientGoesToTheSelectedIndex) {
  const Tensor x = t({1, 3, 3, 2}, {2, 2}).set_requires_grad(true);
  max(x, 1).first.backward(t({10, 20}, {2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (Values{0, 10, 20, 0}));
  const Tensor y = testing::random_tensor({3, 4, 2}, 4).set_requires_grad(true);
  for (int64_t d : {0, 1, 2}) {
    EXPECT_TRUE(
        testing::gradcheck([d](const std::vector<Tensor>& in) { return min(in[0], d, true).first; }, {y}));
    EXPECT_TRUE(testing::gradcheck([d](const std::vector<Tensor>& in) { return max(in[0], d).first; }, {y}));
  }
}

TEST(Reduce, AmaxAminAndTies) {
  const Tensor x = cube();
  EXPECT_EQ(amax(x, {0, 2}).to_vector<double>(), (Values{6, 5.5, 9}));
  EXPECT_EQ(amin(x, {1}, true).to_vector<double>(), (Values{3, 1, 2, 3.5}));
  EXPECT_EQ(max(x).item(), 9);
  EXPECT_EQ(min(x).item(), 1);
  // Ties share the gradient evenly, as PyTorch's amax.
  const Tensor tied = t({1, 4, 4, 2, 4, 0}, {2, 3}).set_requires_grad(true);
  max(tied).backward(Tensor::full({}, 6.0, DType::f64));
  EXPECT_EQ(tied.grad().to_vector<double>(), (Values{0, 2, 2, 0, 2, 0}));
  const Tensor y = testing::random_tensor({3, 4}, 5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return amax(in[0], {1}); }, {y}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return amin(in[0], {0}, true); }, {y}));
}

TEST(Reduce, VarStd) {
  const Tensor x = t({1, 2, 3, 4, 6, 8}, {2, 3});
  EXPECT_EQ(var(x, {1}).to_vector<double>(), (Values{1, 4}));
  EXPECT_EQ(var(x, {1}, 0).to_vector<double>(), (Values{2.0 / 3, 8.0 / 3}));
  EXPECT_EQ(std(x, {1}, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(std(x, {1}).to_vector<double>(), (Values{1, 2}));
  double m = 0, ss = 0;
  for (double v : {1, 2, 3, 4, 6, 8}) m += v / 6;
  for (double v : {1, 2, 3, 4, 6, 8}) ss += (v - m) * (v - m);
  EXPECT_NEAR(var(x).item(), ss / 5, 1e-12);
  EXPECT_NEAR(std(x, {}, 0).item(), std::sqrt(ss / 6), 1e-12);
  EXPECT_TRUE(std::isnan(var(t({3}, {1})).item()));  // N - correction = 0
  const Tensor y = testing::random_tensor({3, 5}, 6).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return var(in[0], {1}); }, {y}));
  EXPECT_TRUE(
      testing::gradcheck([](const std::vector<Tensor>& in) { return std(in[0], {0}, 0, true); }, {y}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return var(in[0]); }, {y}));
}

TEST(Reduce, Norm) {
  const Tensor x = t({3, -4, 0, 1, -2, 2}, {2, 3});
  EXPECT_EQ(norm(x, 2, {1}).to_vector<double>(), (Values{5, 3}));
  EXPECT_EQ(norm(x, 1, {1}).to_vector<double>(), (Values{7, 5}));
  EXPECT_EQ(norm(x, INFINITY, {1}).to_vector<double>(), (Values{4, 2}));
  EXPECT_NEAR(norm(x, 3, {1}).to_vector<double>()[0], std::cbrt(27.0 + 64.0), 1e-12);
  EXPECT_NEAR(norm(x).item(), std::sqrt(34.0), 1e-12);
  EXPECT_THROW(norm(x, 0), ValueError);
  EXPECT_THROW(norm(x, -1), ValueError);
  const Tensor y = testing::random_tensor({3, 4}, 7).set_requires_grad(true);
  for (double p : {1.0, 2.0, 3.0, 1.5, static_cast<double>(INFINITY)}) {
    EXPECT_TRUE(testing::gradcheck([p](const std::vector<Tensor>& in) { return norm(in[0], p, {1}); }, {y}))
        << p;
  }
  // The 2-norm of zeros has gradient 0 (not NaN).
  const Tensor z = Tensor::zeros({3}, DType::f64).set_requires_grad(true);
  norm(z).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (Values{0, 0, 0}));
  // Ties of the inf-norm share the gradient.
  const Tensor tied = t({-2, 2, 1}, {3}).set_requires_grad(true);
  norm(tied, INFINITY).backward();
  EXPECT_EQ(tied.grad().to_vector<double>(), (Values{-0.5, 0.5, 0}));
}

TEST(Reduce, LogSumExp) {
  const Tensor x = t({0, 0, 1000, 1000, -INFINITY, 0}, {3, 2});
  const Values v = logsumexp(x, {1}).to_vector<double>();
  EXPECT_NEAR(v[0], std::log(2.0), 1e-12);
  EXPECT_NEAR(v[1], 1000 + std::log(2.0), 1e-9);  // no overflow
  EXPECT_NEAR(v[2], 0, 1e-12);
  EXPECT_EQ(logsumexp(t({-INFINITY, -INFINITY}, {2}), {0}).item(), -INFINITY);
  EXPECT_EQ(logsumexp(t({INFINITY, 1}, {2}), {0}).item(), INFINITY);
  const Tensor y = testing::random_tensor({2, 3, 4}, 8).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return logsumexp(in[0], {0, 2});
      },
      {y}));
}

TEST(Reduce, GradcheckSumMeanOverDims) {
  const Tensor x = testing::random_tensor({2, 3, 4}, 1).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return sum(in[0], {0, 2}); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return mean(in[0], {1}, true); }, {x}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return sum(in[0].permute({2, 0, 1}), {1});
      },
      {x}));
}

TEST(Reduce, BackwardValues) {
  const Tensor x = Tensor::zeros({2, 2}, DType::f64).set_requires_grad(true);
  mean(x).backward(Tensor::full({}, 2.0, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (Values(4, 0.5)));
}

TEST(Reduce, Errors) {
  EXPECT_THROW(sum(Tensor::zeros({2}, DType::i64)), DTypeError);
  EXPECT_THROW(mean(Tensor::zeros({2}, DType::u8)), DTypeError);
  EXPECT_THROW(sum(Tensor::zeros({2}, DType::f16), {0}), DTypeError);  // CPU half
  try {
    sum(Tensor::zeros({2, 3}), {2});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("sum: dimension 2 out of range for shape [2, 3]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(sum(Tensor::zeros({2, 3}), {1, -1}), ShapeError);  // repeated
  EXPECT_THROW(max(Tensor::zeros({2, 3}), -3), ShapeError);
  EXPECT_THROW(sum(Tensor()), ValueError);
}

}  // namespace
}  // namespace liftoff
