#include "ops/cross_entropy/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Direct formula: mean over rows of -sum_j target_j * log(softmax_j), target = (1 - s) onehot + s / C.
double reference_loss(const Tensor& logits, const std::vector<int64_t>& labels, double s) {
  const std::vector<double> z = logits.to_vector<double>();
  const int64_t n = logits.size(0), c = logits.size(1);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double denom = 0.0;
    for (int64_t j = 0; j < c; ++j) denom += std::exp(z[i * c + j]);
    for (int64_t j = 0; j < c; ++j) {
      const double target = (j == labels[i] ? 1.0 - s : 0.0) + s / static_cast<double>(c);
      total -= target * std::log(std::exp(z[i * c + j]) / denom);
    }
  }
  return total / static_cast<double>(n);
}

TEST(CrossEntropy, MatchesDirectFormula) {
  const Tensor logits = testing::random_tensor({5, 7}, 1, -3, 3);
  const std::vector<int64_t> labels{0, 6, 3, 3, 1};
  const Tensor l = Tensor::from_vector<int64_t>(labels, {5});
  for (double s : {0.0, 0.1, 1.0}) {
    const Tensor loss = cross_entropy(logits, l, s);
    EXPECT_EQ(loss.shape(), Shape{});
    EXPECT_NEAR(loss.item(), reference_loss(logits, labels, s), 1e-12) << "smoothing " << s;
  }
}

TEST(CrossEntropy, HandValue) {
  // Two equal logits: loss = log 2 whatever the label.
  const Tensor logits = Tensor::from_vector<float>({0.5f, 0.5f}, {1, 2});
  EXPECT_NEAR(cross_entropy(logits, Tensor::from_vector<int64_t>({1}, {1})).item(), std::log(2.0), 1e-6);
}

TEST(CrossEntropy, StableForLargeLogits) {
  const Tensor logits = Tensor::from_vector<float>({1000.f, 0.f, -1000.f}, {1, 3});
  EXPECT_NEAR(cross_entropy(logits, Tensor::from_vector<int64_t>({0}, {1})).item(), 0.0, 1e-6);
  EXPECT_NEAR(cross_entropy(logits, Tensor::from_vector<int64_t>({1}, {1})).item(), 1000.0, 1e-3);
}

TEST(CrossEntropy, Gradcheck) {
  const Tensor logits = testing::random_tensor({4, 6}, 2, -2, 2).set_requires_grad(true);
  const Tensor labels = Tensor::from_vector<int64_t>({5, 0, 2, 2}, {4});
  for (double s : {0.0, 0.2}) {
    EXPECT_TRUE(testing::gradcheck(
        [labels, s](const std::vector<Tensor>& in) { return cross_entropy(in[0], labels, s); }, {logits}))
        << "smoothing " << s;
  }
}

TEST(CrossEntropy, BackwardIsSoftmaxMinusTargetOverN) {
  const Tensor logits = Tensor::zeros({2, 4}, DType::f64).set_requires_grad(true);
  cross_entropy(logits, Tensor::from_vector<int64_t>({1, 3}, {2}), 0.4)
      .backward(Tensor::full({}, 2.0, DType::f64));
  // softmax = 0.25; target = 0.1 off-label, 0.7 on-label; (p - t) / 2 * 2.
  const std::vector<double> g = logits.grad().to_vector<double>();
  const std::vector<double> expected{0.15, -0.45, 0.15, 0.15, 0.15, 0.15, 0.15, -0.45};
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], expected[i], 1e-12);
}

TEST(CrossEntropy, BadLabelNamesLabelAndRow) {
  const Tensor logits = Tensor::zeros({3, 4});
  try {
    cross_entropy(logits, Tensor::from_vector<int64_t>({0, 4, 1}, {3}));
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("label 4 in row 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cross_entropy(logits, Tensor::from_vector<int64_t>({0, -1, 1}, {3})), ValueError);
}

TEST(CrossEntropy, RejectsBadArguments) {
  const Tensor logits = Tensor::zeros({3, 4});
  EXPECT_THROW(cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1, 2}, {3})), DTypeError);
  EXPECT_THROW(cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1}, {2})), ShapeError);
  EXPECT_THROW(cross_entropy(Tensor::zeros({12}), Tensor::from_vector<int64_t>({0}, {1})), ShapeError);
  EXPECT_THROW(cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1, 2}, {3}), 1.5), ValueError);
  EXPECT_THROW(cross_entropy(Tensor::zeros({3, 4}, DType::i64), Tensor::from_vector<int64_t>({0, 1, 2}, {3})),
               DTypeError);
}

}  // namespace
}  // namespace liftoff
