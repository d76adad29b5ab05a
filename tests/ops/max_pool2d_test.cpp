#include "ops/max_pool2d/max_pool2d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Direct reference in double; padded positions are never candidates (they count as -inf).
Tensor naive_max_pool2d(const Tensor& x, int64_t k, int64_t stride, int64_t pad) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo) {
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t ih = y * stride - pad + i, iw = xo * stride - pad + j;
            if (ih >= 0 && ih < h && iw >= 0 && iw < w) best = std::max(best, xv[(p * h + ih) * w + iw]);
          }
        out.push_back(best);
      }
  return Tensor::from_vector<double>(out, {n, c, oh, ow});
}

template <class E, class Fn>
void expect_error(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << fragment << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(MaxPool2d, HandComputed) {
  const Tensor x =
      Tensor::from_vector<float>({1, 5, 2, 0, 3, 4, 8, 7, -1, -2, 6, 9, 0, 1, 2, 3}, {1, 1, 4, 4});
  EXPECT_EQ(max_pool2d(x, 2, 2).to_vector<float>(), (std::vector<float>{5, 8, 1, 9}));
}

TEST(MaxPool2d, PaddingCountsAsMinusInfinity) {
  // All values negative: a zero from padding must never win.
  const Tensor x = Tensor::from_vector<float>({-4, -3, -2, -1}, {1, 1, 2, 2});
  EXPECT_EQ(max_pool2d(x, 3, 1, 1).to_vector<float>(), (std::vector<float>{-1, -1, -1, -1}));
  EXPECT_EQ(max_pool2d(x, 2, 2, 1).to_vector<float>(), (std::vector<float>{-4, -3, -2, -1}));
}

TEST(MaxPool2d, PropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector<float>({1, nan, 2, 3}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(x, 2, 2).to_vector<float>()[0]));
}

struct Case {
  Shape x;
  int64_t kernel, stride, padding;
};
const std::vector<Case> kCases = {
    {{2, 3, 6, 6}, 2, 2, 0}, {{2, 2, 7, 7}, 3, 2, 1}, {{1, 3, 5, 6}, 3, 1, 1},
    {{3, 1, 5, 5}, 2, 1, 1}, {{1, 2, 4, 4}, 1, 2, 0},
};

TEST(MaxPool2d, MatchesNaiveReference) {
  for (const Case& c : kCases) {
    for (DType dt : {DType::f32, DType::f64}) {
      const Tensor x = testing::random_tensor(c.x, 5, -1, 1, dt);
      EXPECT_TRUE(testing::all_close(max_pool2d(x, c.kernel, c.stride, c.padding).to(DType::f64),
                                     naive_max_pool2d(x, c.kernel, c.stride, c.padding), 0, 0))
          << shape_str(c.x) << " k" << c.kernel << " s" << c.stride << " p" << c.padding;
    }
  }
}

TEST(MaxPool2d, Gradcheck) {
  // Random values: ties (where the max is not differentiable) have probability zero.
  for (const Case& c : kCases) {
    const Tensor x = testing::random_tensor(c.x, 6).set_requires_grad(true);
    const int64_t k = c.kernel, s = c.stride, p = c.padding;
    EXPECT_TRUE(testing::gradcheck(
        [k, s, p](const std::vector<Tensor>& in) { return max_pool2d(in[0], k, s, p); }, {x}))
        << shape_str(c.x) << " k" << c.kernel << " s" << c.stride << " p" << c.padding;
  }
}

TEST(MaxPool2d, OverlappingWindowsSumGradients) {
  // 3x3 windows with stride 1 over a 3x4 image whose maximum sits in the middle: both windows pick it.
  const Tensor x =
      Tensor::from_vector<double>({0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0}, {1, 1, 3, 4}).set_requires_grad(true);
  max_pool2d(x, 3, 1).backward(Tensor::from_vector<double>({1.5, 2.0}, {1, 1, 1, 2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 0, 3.5, 0, 0, 0, 0, 0, 0}));
}

TEST(MaxPool2d, RejectsBadArguments) {
  const Tensor x = Tensor::zeros({2, 3, 8, 8});
  expect_error<ShapeError>([&] { max_pool2d(Tensor::zeros({3, 8, 8}), 2, 2); }, "4-D input");
  expect_error<ValueError>([&] { max_pool2d(x, 0, 2); }, "kernel size must be positive");
  expect_error<ValueError>([&] { max_pool2d(x, 2, 0); }, "stride must be positive");
  expect_error<ValueError>([&] { max_pool2d(x, 3, 1, -1); }, "padding -1");
  expect_error<ValueError>([&] { max_pool2d(x, 3, 1, 2); }, "padding 2 must be between 0 and half");
  expect_error<ShapeError>([&] { max_pool2d(Tensor::zeros({2, 3, 2, 8}), 3, 1); }, "[2, 3, 2, 8]");
  expect_error<DTypeError>([&] { max_pool2d(Tensor::zeros({2, 3, 8, 8}, DType::i32), 2, 2); }, "floating");
  expect_error<DTypeError>([&] { max_pool2d(Tensor::zeros({2, 3, 8, 8}, DType::bf16), 2, 2); }, "max_pool2d");
}

}  // namespace
}  // namespace liftoff
