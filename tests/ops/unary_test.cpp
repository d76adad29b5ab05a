#include "ops/unary/unary.h"

#include <gtest/gtest.h>

#include <limits>

#include "ops/add/add.h"
#include "ops/reduce/reduce.h"
#include "ops/scale/scale.h"
#include "runtime/autograd.h"
#include "tests/ops/unary_cases.h"

namespace liftoff {
namespace {

using testing::all_close;
using testing::unary_cases;
using testing::unary_sample;
using testing::UnaryCase;

Tensor map_ref(const UnaryCase& c, const Tensor& x) {
  std::vector<double> values = x.to_vector<double>();
  for (double& v : values) v = c.ref(v);
  return Tensor::from_vector<double>(values, x.shape());
}

// d/dx of op at each point (sum of op(x) backward).
std::vector<double> grads_at(const std::function<Tensor(const Tensor&)>& op,
                             const std::vector<double>& points) {
  const Tensor x = Tensor::from_vector<double>(points, {static_cast<int64_t>(points.size())});
  x.set_requires_grad(true);
  sum(op(x)).backward();
  return x.grad().to_vector<double>();
}

class UnaryOps : public ::testing::TestWithParam<size_t> {
 protected:
  const UnaryCase& op_case() const { return unary_cases()[GetParam()]; }
};

TEST_P(UnaryOps, ForwardMatchesStdMathInF64) {
  const UnaryCase& c = op_case();
  // Random points plus the kinks themselves (the forward is defined there).
  std::vector<double> values = testing::random_tensor({40}, 11, c.lo, c.hi).to_vector<double>();
  values.insert(values.end(), c.kinks.begin(), c.kinks.end());
  const Tensor x = Tensor::from_vector<double>(values, {static_cast<int64_t>(values.size())});
  const Tensor y = c.op(x);
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_TRUE(all_close(y, map_ref(c, x), 1e-14, 1e-12));
}

TEST_P(UnaryOps, ForwardInF32) {
  const UnaryCase& c = op_case();
  const Tensor x = testing::random_tensor({5, 9}, 12, c.lo, c.hi, DType::f32);
  const Tensor y = c.op(x);
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_TRUE(all_close(y, map_ref(c, x), 1e-6, 1e-6));
}

TEST_P(UnaryOps, Gradcheck) {
  const UnaryCase& c = op_case();
  const Tensor x = unary_sample(c, {3, 7}, 13).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([&c](const std::vector<Tensor>& in) { return c.op(in[0]); }, {x}));
}

TEST_P(UnaryOps, NonContiguousInputAndItsGradient) {
  const UnaryCase& c = op_case();
  const Tensor base = unary_sample(c, {4, 6, 3}, 14);
  // A permuted, sliced view: neither contiguous nor dense.
  const Tensor view = base.permute({2, 0, 1}).slice(1, 1, 3);
  ASSERT_FALSE(view.is_contiguous());
  const Tensor y = c.op(view);
  EXPECT_EQ(y.shape(), (Shape{3, 2, 6}));
  EXPECT_TRUE(all_close(y, map_ref(c, view.contiguous()), 1e-14, 1e-12));
  const Tensor leaf = base.clone().set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [&c](const std::vector<Tensor>& in) {
        return c.op(in[0].permute({2, 0, 1}).slice(1, 1, 3));
      },
      {leaf}));
}

TEST_P(UnaryOps, ZeroDimAndEmptyTensors) {
  const UnaryCase& c = op_case();
  const double v = 0.5 * (c.lo + c.hi) + 0.123;
  const Tensor scalar = Tensor::full({}, v, DType::f64);
  const Tensor y = c.op(scalar);
  EXPECT_EQ(y.shape(), Shape{});
  EXPECT_NEAR(y.item(), c.ref(v), 1e-14);
  const Tensor empty = Tensor::zeros({0, 3}, DType::f64).set_requires_grad(true);
  const Tensor e = c.op(empty);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  sum(e).backward();
  EXPECT_EQ(empty.grad().shape(), (Shape{0, 3}));
}

TEST_P(UnaryOps, RejectsIntegerAndCpuHalfInputs) {
  const UnaryCase& c = op_case();
  try {
    c.op(Tensor::zeros({2, 3}, DType::i64));
    ADD_FAILURE() << "an i64 input was accepted";
  } catch (const DTypeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(c.api + ":"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
    EXPECT_NE(message.find("i64"), std::string::npos) << message;
  }
  EXPECT_THROW(c.op(Tensor::zeros({2}, DType::f16)), DTypeError);
  EXPECT_THROW(c.op(Tensor::zeros({2}, DType::bf16)), DTypeError);
}

INSTANTIATE_TEST_SUITE_P(All, UnaryOps, ::testing::Range<size_t>(0, unary_cases().size()),
                         testing::unary_case_name);

TEST(Gelu, ReferenceValuesOfBothForms) {
  const Tensor x = Tensor::from_vector<double>({-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0}, {7});
  const Tensor exact =
      Tensor::from_vector<double>({-0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0.0,
                                   0.34573123063700656, 0.8413447460685429, 1.9544997361036416},
                                  {7});
  const Tensor approx =
      Tensor::from_vector<double>({-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                                   0.34571400982514394, 0.8411919906082768, 1.954597694087775},
                                  {7});
  EXPECT_TRUE(all_close(gelu(x), exact, 1e-15, 1e-13));
  EXPECT_TRUE(all_close(gelu(x, "none"), exact, 1e-15, 1e-13));
  EXPECT_TRUE(all_close(gelu(x, "tanh"), approx, 1e-15, 1e-13));
  // The two forms differ by more than the tolerance: the test tells them apart.
  EXPECT_FALSE(all_close(gelu(x, "tanh"), exact, 1e-6, 1e-6));
}

TEST(Gelu, RejectsUnknownApproximation) {
  try {
    gelu(Tensor::zeros({2}), "erf");
    FAIL() << "approximate=\"erf\" was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'erf'"), std::string::npos) << e.what();
  }
}

// Subgradients at the kinks follow PyTorch's backward formulas.
TEST(UnaryKinks, GradientsMatchPyTorch) {
  EXPECT_EQ(grads_at([](const Tensor& x) { return abs(x); }, {0.0}), std::vector<double>{0.0});
  EXPECT_EQ(grads_at([](const Tensor& x) { return relu6(x); }, {0.0, 6.0, 3.0}),
            (std::vector<double>{0.0, 0.0, 1.0}));
  EXPECT_EQ(grads_at([](const Tensor& x) { return hardsigmoid(x); }, {-3.0, 3.0, 0.0}),
            (std::vector<double>{0.0, 0.0, 1.0 / 6.0}));
  EXPECT_EQ(grads_at([](const Tensor& x) { return hardswish(x); }, {-3.0, 3.0, -4.0, 4.0}),
            (std::vector<double>{-0.5, 1.5, 0.0, 1.0}));
  EXPECT_EQ(grads_at([](const Tensor& x) { return leaky_relu(x, 0.2); }, {0.0}), std::vector<double>{0.2});
  EXPECT_EQ(grads_at([](const Tensor& x) { return elu(x, 1.5); }, {0.0}), std::vector<double>{1.5});
  EXPECT_EQ(grads_at([](const Tensor& x) { return clamp(x, -1.0, 2.0); }, {-1.0, 2.0, -1.5, 2.5}),
            (std::vector<double>{1.0, 1.0, 0.0, 0.0}));
}

TEST(Clamp, PyTorchEdgeCases) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::from_vector<double>({-2.0, 0.5, 3.0, nan}, {4});
  // min > max: every element becomes max (torch.clamp applies min, then max).
  const std::vector<double> inverted = clamp(x, 1.0, 0.0).to_vector<double>();
  EXPECT_EQ(inverted[0], 0.0);
  EXPECT_EQ(inverted[1], 0.0);
  EXPECT_EQ(inverted[2], 0.0);
  // NaN stays NaN with one or two bounds.
  EXPECT_TRUE(std::isnan(clamp(x, 0.0, 1.0).to_vector<double>()[3]));
  EXPECT_TRUE(std::isnan(clamp(x, std::nullopt, 1.0).to_vector<double>()[3]));
  EXPECT_THROW(clamp(x), ValueError);
  EXPECT_THROW(clamp(x, std::nullopt, std::nullopt), ValueError);
}

TEST(Softplus, ThresholdAndBeta) {
  const Tensor x = Tensor::from_vector<double>({25.0, 100.0, -100.0, 0.0}, {4});
  const std::vector<double> y = softplus(x).to_vector<double>();
  EXPECT_EQ(y[0], 25.0);  // above the threshold: x itself
  EXPECT_EQ(y[1], 100.0);
  EXPECT_NEAR(y[2], 0.0, 1e-40);
  EXPECT_NEAR(y[3], std::log(2.0), 1e-15);
  EXPECT_NEAR(softplus(Tensor::full({}, 1.0, DType::f64), 3.0).item(), std::log1p(std::exp(3.0)) / 3.0,
              1e-15);
  EXPECT_THROW(softplus(x, 0.0), ValueError);
}

TEST(Sigmoid, SaturatesWithoutNaN) {
  const Tensor x = Tensor::from_vector<float>({-1000.f, 1000.f}, {2}).set_requires_grad(true);
  const Tensor y = sigmoid(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.f, 1.f}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.f, 0.f}));
  EXPECT_EQ(silu(x.detach()).to_vector<float>()[1], 1000.f);
}

TEST(UnaryMinus, NegatesValuesAndGradient) {
  const Tensor x = Tensor::from_vector<float>({1.f, -2.f, 0.5f}, {3}).set_requires_grad(true);
  const Tensor y = -x;
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-1.f, 2.f, -0.5f}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{-1.f, -1.f, -1.f}));
}

TEST(UnaryAutograd, ChainOfOps) {
  // d/dx sum(exp(sin(x))) = exp(sin(x)) cos(x): the chain rule through two nodes, against the formula.
  const Tensor x = Tensor::from_vector<double>({-1.0, 0.25, 2.0}, {3}).set_requires_grad(true);
  sum(exp(sin(x))).backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  const std::vector<double> xs = {-1.0, 0.25, 2.0};
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(g[i], std::exp(std::sin(xs[i])) * std::cos(xs[i]), 1e-14);

  // A longer chain, mixing saved-input and saved-output ops, and a reused intermediate.
  const Tensor z = testing::random_tensor({2, 5}, 21, 0.1, 1.0).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        const Tensor s = sigmoid(in[0]);
        return rsqrt(softplus(gelu(tanh(s) * 3.0, "tanh"))) * 0.5 + silu(-s) + square(log(sqrt(s)));
      },
      {z}));
}

TEST(UnaryAutograd, NoGraphUnderNoGrad) {
  const Tensor x = Tensor::ones({3}).set_requires_grad(true);
  EXPECT_TRUE(tanh(x).requires_grad());
  NoGradGuard no_grad;
  EXPECT_FALSE(tanh(x).requires_grad());
}

}  // namespace
}  // namespace liftoff
