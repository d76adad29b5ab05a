#include "ops/loss/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/autocast.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return Tensor::from_vector<double>(v, shape);
}

void expect_values(const Tensor& actual, const std::vector<double>& expected, double tol = 1e-12) {
  const std::vector<double> a = actual.to_vector<double>();
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], expected[i], tol) << "element " << i;
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// d = input - target = [1, 0, -2, -1].
const std::vector<double> kX{1, 2, -1, 0.5}, kT{0, 2, 1, 1.5};

TEST(Loss, MseAndL1ByHand) {
  const Tensor x = f64(kX, {2, 2}), t = f64(kT, {2, 2});
  const Tensor none = mse_loss(x, t, "none");
  EXPECT_EQ(none.shape(), Shape({2, 2}));
  expect_values(none, {1, 0, 4, 1});
  EXPECT_EQ(mse_loss(x, t).shape(), Shape{});
  EXPECT_DOUBLE_EQ(mse_loss(x, t).item(), 1.5);
  EXPECT_DOUBLE_EQ(mse_loss(x, t, "sum").item(), 6.0);
  expect_values(l1_loss(x, t, "none"), {1, 0, 2, 1});
  EXPECT_DOUBLE_EQ(l1_loss(x, t).item(), 1.0);
  EXPECT_DOUBLE_EQ(l1_loss(x, t, "sum").item(), 4.0);
}

TEST(Loss, SmoothL1AndHuberByHand) {
  const Tensor x = f64(kX, {4}), t = f64(kT, {4});
  // |d| < 1.5: 0.5 d^2 / 1.5; |d| = 2: 2 - 0.75.
  expect_values(smooth_l1_loss(x, t, "none", 1.5), {0.5 / 1.5, 0, 1.25, 0.5 / 1.5});
  // |d| < 1.5: 0.5 d^2; |d| = 2: 1.5 (2 - 0.75).
  expect_values(huber_loss(x, t, "none", 1.5), {0.5, 0, 1.875, 0.5});
  EXPECT_DOUBLE_EQ(huber_loss(x, t, "mean", 1.5).item(), (0.5 + 1.875 + 0.5) / 4);
  // beta = 0 is l1; delta = 1 Huber equals beta = 1 smooth L1.
  expect_values(smooth_l1_loss(x, t, "none", 0.0), {1, 0, 2, 1});
  EXPECT_DOUBLE_EQ(huber_loss(x, t).item(), smooth_l1_loss(x, t).item());
}

double bce_reference(double x, double t, double w, double pw) {
  const double s = 1.0 / (1.0 + std::exp(-x));
  return -w * (pw * t * std::log(s) + (1 - t) * std::log(1 - s));
}

TEST(Loss, BceWithLogitsMatchesDefinition) {
  const Tensor x = testing::random_tensor({3, 4}, 1, -3, 3);
  const Tensor t = testing::random_tensor({3, 4}, 2, 0, 1);
  const Tensor w = f64({0.5, 1.0, 2.0}, {3, 1});  // broadcast over the columns
  const Tensor pw = f64({1.0, 2.0, 0.5, 3.0}, {4});
  const std::vector<double> xv = x.to_vector<double>(), tv = t.to_vector<double>();
  std::vector<double> expected, expected_plain;
  double sum = 0.0;
  for (size_t i = 0; i < xv.size(); ++i) {
    expected.push_back(
        bce_reference(xv[i], tv[i], w.to_vector<double>()[i / 4], pw.to_vector<double>()[i % 4]));
    expected_plain.push_back(bce_reference(xv[i], tv[i], 1, 1));
    sum += expected.back();
  }
  expect_values(binary_cross_entropy_with_logits(x, t, w, "none", pw), expected);
  expect_values(binary_cross_entropy_with_logits(x, t, Tensor(), "none"), expected_plain);
  EXPECT_NEAR(binary_cross_entropy_with_logits(x, t, w, "mean", pw).item(), sum / 12, 1e-12);
  EXPECT_NEAR(binary_cross_entropy_with_logits(x, t, w, "sum", pw).item(), sum, 1e-12);
}

TEST(Loss, BceWithLogitsIsStableForLargeLogits) {
  const Tensor x = Tensor::from_vector<float>({100.f, -100.f, 100.f}, {3});
  const Tensor t = Tensor::from_vector<float>({0.f, 1.f, 1.f}, {3});
  expect_values(binary_cross_entropy_with_logits(x, t, Tensor(), "none"), {100, 100, 0}, 1e-4);
}

TEST(Loss, KlDivByHand) {
  const Tensor x = f64({-1.0, -2.0, -0.5, -3.0}, {2, 2});
  const Tensor t = f64({0.25, 0.0, 0.5, 0.75}, {2, 2});
  const std::vector<double> expected{0.25 * (std::log(0.25) + 1.0), 0.0, 0.5 * (std::log(0.5) + 0.5),
                                     0.75 * (std::log(0.75) + 3.0)};
  expect_values(kl_div(x, t, "none"), expected);
  const double sum = expected[0] + expected[1] + expected[2] + expected[3];
  EXPECT_NEAR(kl_div(x, t, "batchmean").item(), sum / 2, 1e-12);
  EXPECT_NEAR(kl_div(x, t, "mean").item(), sum / 4, 1e-12);
  // log_target: exp(t) (t - x) with t given as log-probabilities.
  const Tensor lt = f64({std::log(0.25), std::log(0.5), std::log(0.5), std::log(0.75)}, {2, 2});
  const std::vector<double> lv = lt.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> expected_log;
  for (size_t i = 0; i < 4; ++i) expected_log.push_back(std::exp(lv[i]) * (lv[i] - xv[i]));
  expect_values(kl_div(x, lt, "none", true), expected_log);
}

TEST(Loss, EmptyInputMeanIsNanSumIsZero) {
  const Tensor x = Tensor::zeros({0, 3}), t = Tensor::zeros({0, 3});
  EXPECT_TRUE(std::isnan(mse_loss(x, t).item()));
  EXPECT_EQ(mse_loss(x, t, "sum").item(), 0.0);
  EXPECT_EQ(mse_loss(x, t, "none").shape(), Shape({0, 3}));
}

TEST(Loss, NonContiguousInputs) {
  const Tensor base = testing::random_tensor({3, 4}, 3);
  const Tensor target = testing::random_tensor({4, 3}, 4);
  const Tensor view = base.permute({1, 0});  // [4, 3], strided
  ASSERT_FALSE(view.is_contiguous());
  EXPECT_DOUBLE_EQ(mse_loss(view, target).item(), mse_loss(view.contiguous(), target).item());
  EXPECT_DOUBLE_EQ(
      l1_loss(view.slice(0, 1, 3), target.slice(0, 1, 3), "sum").item(),
      l1_loss(view.contiguous().slice(0, 1, 3).contiguous(), target.slice(0, 1, 3), "sum").item());
}

TEST(Loss, PromotesMixedDtypesAndUpcastsUnderAutocast) {
  const Tensor x = Tensor::from_vector<float>({1.f, 2.f}, {2});
  const Tensor t = f64({0.5, 0.0}, {2});
  const Tensor l = mse_loss(x, t);
  EXPECT_EQ(l.dtype(), DType::f64);
  EXPECT_DOUBLE_EQ(l.item(), (0.25 + 4.0) / 2);
  // A bf16 input under autocast computes in f32 (the CPU kernels have no bf16 path, so this would throw
  // without the upcast) and its gradient comes back as bf16.
  const Tensor xb = x.to(DType::bf16).set_requires_grad(true);
  Tensor lb;
  {
    AutocastGuard autocast(DType::bf16);
    lb = mse_loss(xb, Tensor::from_vector<float>({0.5f, 0.f}, {2}).to(DType::bf16));
  }
  EXPECT_EQ(lb.dtype(), DType::f32);
  EXPECT_DOUBLE_EQ(lb.item(), (0.25 + 4.0) / 2);
  lb.backward();
  EXPECT_EQ(xb.grad().dtype(), DType::bf16);
  expect_values(xb.grad(), {0.5, 2.0});
}

TEST(Loss, GradcheckPointwise) {
  const Tensor x = testing::random_tensor({3, 4}, 5, -2, 2).set_requires_grad(true);
  const Tensor t = testing::random_tensor({3, 4}, 6, -2, 2).set_requires_grad(true);
  for (const char* r : {"mean", "sum", "none"}) {
    EXPECT_TRUE(testing::gradcheck([r](const auto& in) { return mse_loss(in[0], in[1], r); }, {x, t})) << r;
    EXPECT_TRUE(testing::gradcheck([r](const auto& in) { return l1_loss(in[0], in[1], r); }, {x, t})) << r;
    EXPECT_TRUE(
        testing::gradcheck([r](const auto& in) { return smooth_l1_loss(in[0], in[1], r, 0.7); }, {x, t}))
        << r;
    EXPECT_TRUE(testing::gradcheck([r](const auto& in) { return huber_loss(in[0], in[1], r, 0.7); }, {x, t}))
        << r;
  }
}

TEST(Loss, GradcheckBceAndKlDiv) {
  const Tensor x = testing::random_tensor({3, 4}, 7, -3, 3).set_requires_grad(true);
  const Tensor t = testing::random_tensor({3, 4}, 8, 0.05, 1).set_requires_grad(true);
  const Tensor w = testing::random_tensor({4}, 9, 0.5, 2);
  const Tensor pw = testing::random_tensor({3, 1}, 10, 0.5, 3);
  for (const char* r : {"mean", "none"}) {
    EXPECT_TRUE(testing::gradcheck(
        [r, w, pw](const auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], w, r, pw); },
        {x, t}))
        << r;
    EXPECT_TRUE(testing::gradcheck([r](const auto& in) { return kl_div(in[0], in[1], r); }, {x, t})) << r;
    EXPECT_TRUE(testing::gradcheck([r](const auto& in) { return kl_div(in[0], in[1], r, true); }, {x, t}))
        << r;
  }
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return kl_div(in[0], in[1], "batchmean"); }, {x, t}));
}

TEST(Loss, ErrorsNameShapes) {
  const Tensor x = Tensor::zeros({3, 4});
  const std::string e = error_of([&] { mse_loss(x, Tensor::zeros({4, 3})); });
  EXPECT_NE(e.find("mse_loss"), std::string::npos) << e;
  EXPECT_NE(e.find("[4, 3]"), std::string::npos) << e;
  EXPECT_NE(e.find("[3, 4]"), std::string::npos) << e;
  EXPECT_THROW(mse_loss(x, Tensor::zeros({3, 4}), "avg"), ValueError);
  EXPECT_THROW(mse_loss(x, Tensor::zeros({3, 4}, DType::i64)), DTypeError);
  EXPECT_THROW(kl_div(x, x, "bogus"), ValueError);
  EXPECT_THROW(mse_loss(x, x, "batchmean"), ValueError);
  EXPECT_THROW(smooth_l1_loss(x, x, "mean", -1.0), ValueError);
  EXPECT_THROW(huber_loss(x, x, "mean", 0.0), ValueError);
  const std::string w = error_of([&] { binary_cross_entropy_with_logits(x, x, Tensor::ones({3})); });
  EXPECT_NE(w.find("weight [3] does not broadcast to input [3, 4]"), std::string::npos) << w;
}

// ---- nll_loss ----

TEST(NllLoss, ByHandWithWeightsAndIgnoreIndex) {
  const Tensor x = f64({-1, -2, -3, -4, -5, -6, -7, -8, -9}, {3, 3});
  const Tensor target = Tensor::from_vector<int64_t>({2, 0, 1}, {3});
  expect_values(nll_loss(x, target, Tensor(), -100, "none"), {3, 4, 8});
  EXPECT_DOUBLE_EQ(nll_loss(x, target).item(), 5.0);
  EXPECT_DOUBLE_EQ(nll_loss(x, target, Tensor(), -100, "sum").item(), 15.0);
  const Tensor w = f64({1.0, 2.0, 0.5}, {3});
  // losses 0.5*3, 1*4, 2*8; weighted mean divides by 0.5 + 1 + 2.
  expect_values(nll_loss(x, target, w, -100, "none"), {1.5, 4, 16});
  EXPECT_DOUBLE_EQ(nll_loss(x, target, w).item(), 21.5 / 3.5);
  // Row 1 ignored: neither its loss nor its weight counts.
  const Tensor ignored = Tensor::from_vector<int64_t>({2, -100, 1}, {3});
  expect_values(nll_loss(x, ignored, w, -100, "none"), {1.5, 0, 16});
  EXPECT_DOUBLE_EQ(nll_loss(x, ignored, w).item(), 17.5 / 2.5);
  EXPECT_DOUBLE_EQ(nll_loss(x, Tensor::from_vector<int64_t>({2, 1, 1}, {3}), Tensor(), 1).item(), 3.0);
  EXPECT_TRUE(std::isnan(nll_loss(x, Tensor::from_vector<int64_t>({5, 5, 5}, {3}), Tensor(), 5).item()));
}

TEST(NllLoss, SpatialAndSingleSample) {
  // input [N=2, C=3, d=2]: element (n, c, s) = 10n + 3s + c (negated).
  std::vector<double> v;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int s = 0; s < 2; ++s) v.push_back(-(10.0 * n + 3.0 * s + c));
  const Tensor x = f64(v, {2, 3, 2});
  const Tensor target = Tensor::from_vector<int32_t>({1, 2, 0, 1}, {2, 2});  // i32 is accepted
  expect_values(nll_loss(x, target, Tensor(), -100, "none"), {1, 5, 10, 14});
  EXPECT_EQ(nll_loss(x, target, Tensor(), -100, "none").shape(), Shape({2, 2}));
  const Tensor single = f64({-0.5, -1.5}, {2});
  EXPECT_DOUBLE_EQ(nll_loss(single, Tensor::from_vector<int64_t>({1}, {})).item(), 1.5);
}

TEST(NllLoss, Gradcheck) {
  const Tensor x = testing::random_tensor({4, 5}, 11, -3, 0).set_requires_grad(true);
  const Tensor target = Tensor::from_vector<int64_t>({4, 0, -100, 2}, {4});
  const Tensor w = testing::random_tensor({5}, 12, 0.5, 2);
  for (const char* r : {"mean", "sum", "none"}) {
    EXPECT_TRUE(testing::gradcheck([&](const auto& in) { return nll_loss(in[0], target, w, -100, r); }, {x}))
        << r;
  }
  const Tensor xs = testing::random_tensor({2, 3, 2, 2}, 13, -3, 0).set_requires_grad(true);
  const Tensor ts = Tensor::from_vector<int64_t>({0, 1, 2, 1, 2, 2, 0, 1}, {2, 2, 2});
  EXPECT_TRUE(testing::gradcheck([&](const auto& in) { return nll_loss(in[0], ts); }, {xs}));
}

TEST(NllLoss, ErrorsNameShapesAndBadTargets) {
  const Tensor x = Tensor::zeros({3, 5});
  const std::string shape = error_of([&] { nll_loss(x, Tensor::from_vector<int64_t>({0, 1}, {2})); });
  EXPECT_NE(shape.find("target [2] does not match input [3, 5]"), std::string::npos) << shape;
  const std::string range = error_of([&] { nll_loss(x, Tensor::from_vector<int64_t>({0, 5, 1}, {3})); });
  EXPECT_NE(range.find("target 5 at position 1 is outside [0, 5)"), std::string::npos) << range;
  EXPECT_THROW(nll_loss(x, Tensor::from_vector<int64_t>({0, -1, 1}, {3})), ValueError);
  EXPECT_THROW(nll_loss(x, Tensor::zeros({3})), DTypeError);
  const std::string w = error_of([&] {
    nll_loss(x, Tensor::from_vector<int64_t>({0, 1, 2}, {3}), Tensor::ones({4}));
  });
  EXPECT_NE(w.find("weight [4]"), std::string::npos) << w;
}

}  // namespace
}  // namespace liftoff
