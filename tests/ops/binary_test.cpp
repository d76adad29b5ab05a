#include "ops/binary/binary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using Values = std::vector<double>;

Tensor t(const Values& values, const Shape& shape) {
  return Tensor::from_vector<double>(values, shape);
}

TEST(Binary, ForwardValues) {
  const Tensor a = t({1, -2, 3, 4}, {2, 2});
  const Tensor b = t({2, 4, -1, 0.5}, {2, 2});
  EXPECT_EQ(sub(a, b).to_vector<double>(), (Values{-1, -6, 4, 3.5}));
  EXPECT_EQ(sub(a, b, 2).to_vector<double>(), (Values{-3, -10, 5, 3}));
  EXPECT_EQ(mul(a, b).to_vector<double>(), (Values{2, -8, -3, 2}));
  EXPECT_EQ(div(a, b).to_vector<double>(), (Values{0.5, -0.5, -3, 8}));
  EXPECT_EQ(pow(a, b).to_vector<double>(), (Values{1, 16, 1.0 / 3, 2}));
  EXPECT_EQ(maximum(a, b).to_vector<double>(), (Values{2, 4, 3, 4}));
  EXPECT_EQ(minimum(a, b).to_vector<double>(), (Values{1, -2, -1, 0.5}));
  EXPECT_EQ(neg(a).to_vector<double>(), (Values{-1, 2, -3, -4}));
}

TEST(Binary, ScalarOperandsAndOperators) {
  const Tensor a = t({1, -2, 4}, {3});
  EXPECT_EQ((a + 1.0).to_vector<double>(), (Values{2, -1, 5}));
  EXPECT_EQ((1.0 + a).to_vector<double>(), (Values{2, -1, 5}));
  EXPECT_EQ((a - 1.0).to_vector<double>(), (Values{0, -3, 3}));
  EXPECT_EQ((1.0 - a).to_vector<double>(), (Values{0, 3, -3}));
  EXPECT_EQ(rsub(a, 1.0, 2.0).to_vector<double>(), (Values{-1, 5, -7}));
  EXPECT_EQ((a * 2.0).to_vector<double>(), (Values{2, -4, 8}));
  EXPECT_EQ(mul(a, 2.0).to_vector<double>(), (Values{2, -4, 8}));
  EXPECT_EQ((a / 2.0).to_vector<double>(), (Values{0.5, -1, 2}));
  EXPECT_EQ((8.0 / a).to_vector<double>(), (Values{8, -4, 2}));
  EXPECT_EQ(pow(a, 2.0).to_vector<double>(), (Values{1, 4, 16}));
  EXPECT_EQ((-a).to_vector<double>(), (Values{-1, 2, -4}));
  EXPECT_EQ((a * a - a / a).to_vector<double>(), (Values{0, 3, 15}));
}

TEST(Binary, ScalarKeepsTheTensorDtype) {
  const Tensor a = Tensor::from_vector<float>({1.f, 2.f}, {2});
  EXPECT_EQ((a + 0.5).dtype(), DType::f32);
  EXPECT_EQ((2.0 / a).dtype(), DType::f32);
}

TEST(Binary, Broadcasting) {
  const Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(add(a, t({10, 20, 30}, {3})).to_vector<double>(), (Values{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(mul(a, t({1, 10}, {2, 1})).to_vector<double>(), (Values{1, 2, 3, 40, 50, 60}));
  const Tensor outer = mul(t({1, 2}, {2, 1}), t({1, 10, 100}, {1, 3}));
  EXPECT_EQ(outer.shape(), (Shape{2, 3}));
  EXPECT_EQ(outer.to_vector<double>(), (Values{1, 10, 100, 2, 20, 200}));
  const Tensor y = sub(t({1, 2}, {2, 1, 1}), t({1, 2, 3}, {3}));  // [2,1,1] - [3] -> [2,1,3]
  EXPECT_EQ(y.shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(y.to_vector<double>(), (Values{0, -1, -2, 1, 0, -1}));
  const Tensor s = add(t({5}, {}), a);  // a 0-d operand
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.to_vector<double>(), (Values{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(add(t({}, {0, 3}), t({1, 2, 3}, {3})).shape(), (Shape{0, 3}));
}

TEST(Binary, NonContiguousAndBroadcastViews) {
  const Tensor base = t({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  const Tensor cols = base.slice(1, 1, 3);         // [3, 2], strides (4, 1)
  const Tensor transposed = base.permute({1, 0});  // [4, 3]
  EXPECT_EQ(add(cols, t({100, 200}, {2})).to_vector<double>(), (Values{102, 203, 106, 207, 110, 211}));
  EXPECT_EQ(mul(transposed.slice(0, 0, 2), t({1, 2, 3}, {3})).to_vector<double>(),
            (Values{1, 10, 27, 2, 12, 30}));
  EXPECT_EQ(maximum(base.select(1, 0), base.select(1, 3)).to_vector<double>(), (Values{4, 8, 12}));
}

TEST(Binary, PromotesToTheWiderFloatingType) {
  const Tensor a = Tensor::from_vector<float>({1.f, 2.f}, {2});
  const Tensor b = t({0.5, 0.25}, {2});
  EXPECT_EQ(mul(a, b).dtype(), DType::f64);
  EXPECT_EQ(mul(b, a).to_vector<double>(), (Values{0.5, 0.5}));
}

TEST(Binary, GradcheckWithBroadcasting) {
  const Tensor a = testing::random_tensor({2, 3, 4}, 1, 0.5, 1.5).set_requires_grad(true);
  const Tensor b = testing::random_tensor({3, 1}, 2, 0.5, 1.5).set_requires_grad(true);
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"mul", [](const Tensor& x, const Tensor& y) { return mul(x, y); }},
      {"div", [](const Tensor& x, const Tensor& y) { return div(x, y); }},
      {"pow", [](const Tensor& x, const Tensor& y) { return pow(x, y); }},
      {"sub", [](const Tensor& x, const Tensor& y) { return sub(x, y, 1.5); }},
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); }},
      {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); }},
      {"minimum", [](const Tensor& x, const Tensor& y) { return minimum(x, y); }},
  };
  for (const auto& [name, fn] : ops) {
    EXPECT_TRUE(
        testing::gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); }, {a, b}))
        << name;
    EXPECT_TRUE(
        testing::gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[1], in[0]); }, {a, b}))
        << name << " (operands swapped)";
  }
}

TEST(Binary, GradcheckScalarForms) {
  const Tensor a = testing::random_tensor({3, 2}, 3, 0.5, 1.5).set_requires_grad(true);
  const std::vector<std::function<Tensor(const Tensor&)>> fns = {
      [](const Tensor& x) { return x + 2.0; },           [](const Tensor& x) { return 2.0 - x; },
      [](const Tensor& x) { return rsub(x, 1.0, 3.0); }, [](const Tensor& x) { return mul(x, -3.0); },
      [](const Tensor& x) { return x / 4.0; },           [](const Tensor& x) { return 4.0 / x; },
      [](const Tensor& x) { return pow(x, 2.5); },       [](const Tensor& x) { return -x; }};
  for (size_t i = 0; i < fns.size(); ++i) {
    EXPECT_TRUE(testing::gradcheck([&](const std::vector<Tensor>& in) { return fns[i](in[0]); }, {a})) << i;
  }
}

TEST(Binary, GradientOfANonContiguousOperand) {
  const Tensor base = testing::random_tensor({4, 3}, 4).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4}, 5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return mul(in[0].permute({1, 0}), in[1]);
      },
      {base, b}));
}

TEST(Binary, PowGradientEdgeCases) {
  // d/da a^0 = 0 (not 0 * a^-1 = NaN at a = 0); d/db 0^b = 0 for b >= 0 (log 0 is -inf), as PyTorch.
  const Tensor a = t({0, 0, 2}, {3}).set_requires_grad(true);
  const Tensor b = t({0, 2, 3}, {3}).set_requires_grad(true);
  pow(a, b).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (Values{0, 0, 12}));
  const Values gb = b.grad().to_vector<double>();
  EXPECT_EQ(gb[0], 0);
  EXPECT_EQ(gb[1], 0);
  EXPECT_NEAR(gb[2], 8 * std::log(2.0), 1e-12);
}

TEST(Binary, MaximumTiesSplitTheGradientAndNaNPropagates) {
  const Tensor a = t({1, 3, 2}, {3}).set_requires_grad(true);
  const Tensor b = t({2, 1, 2}, {3}).set_requires_grad(true);
  maximum(a, b).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (Values{0, 1, 0.5}));
  EXPECT_EQ(b.grad().to_vector<double>(), (Values{1, 0, 0.5}));
  const double nan = std::nan("");
  const Values m = maximum(t({nan, 1}, {2}), t({0, nan}, {2})).to_vector<double>();
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  const Values n = minimum(t({nan, 1}, {2}), t({0, nan}, {2})).to_vector<double>();
  EXPECT_TRUE(std::isnan(n[0]) && std::isnan(n[1]));
}

TEST(Binary, BroadcastGradientIsSummedToTheOperandShape) {
  const Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad(true);
  const Tensor bias = t({0, 0, 0}, {1, 3}).set_requires_grad(true);
  const Tensor scale = t({2}, {}).set_requires_grad(true);
  mul(add(a, bias), scale).backward(Tensor::ones({2, 3}, DType::f64));
  EXPECT_EQ(bias.grad().shape(), (Shape{1, 3}));
  EXPECT_EQ(bias.grad().to_vector<double>(), (Values{4, 4, 4}));
  EXPECT_EQ(scale.grad().shape(), Shape{});
  EXPECT_EQ(scale.grad().item(), 21);
}

TEST(Binary, Errors) {
  try {
    mul(Tensor::zeros({2, 3}), Tensor::zeros({2}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("mul: shapes [2, 3] and [2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(div(Tensor::zeros({2}, DType::i32), 2.0), DTypeError);
  EXPECT_THROW(pow(Tensor::zeros({2}), Tensor::zeros({2}, DType::u8)), DTypeError);
  EXPECT_THROW(sub(Tensor(), 1.0), ValueError);
  EXPECT_THROW(maximum(Tensor::zeros({2}, DType::f16), Tensor::zeros({2}, DType::f16)), DTypeError);  // CPU
}

}  // namespace
}  // namespace liftoff
