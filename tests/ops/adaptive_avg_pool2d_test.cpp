#include "ops/adaptive_avg_pool2d/adaptive_avg_pool2d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Independent reference: bins [floor(o * in / out), ceil((o + 1) * in / out)) in floating point.
Tensor reference(const Tensor& x, int64_t oh, int64_t ow) {
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  const std::vector<double> v = x.to_vector<double>();
  const auto lo = [](int64_t o, int64_t in, int64_t out) {
    return static_cast<int64_t>(std::floor(static_cast<double>(o * in) / static_cast<double>(out)));
  };
  const auto hi = [](int64_t o, int64_t in, int64_t out) {
    return static_cast<int64_t>(std::ceil(static_cast<double>((o + 1) * in) / static_cast<double>(out)));
  };
  std::vector<double> out;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double s = 0.0;
        int64_t count = 0;
        for (int64_t a = lo(i, h, oh); a < hi(i, h, oh); ++a)
          for (int64_t b = lo(j, w, ow); b < hi(j, w, ow); ++b, ++count) s += v[(p * h + a) * w + b];
        out.push_back(s / static_cast<double>(count));
      }
  return Tensor::from_vector<double>(out, {x.size(0), x.size(1), oh, ow});
}

TEST(AdaptiveAvgPool2d, ByHandOverlappingBins) {
  // 5 -> 3 along the width: bins [0, 2), [1, 4), [3, 5); one row.
  const Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5}, {1, 1, 1, 5});
  const Tensor y = adaptive_avg_pool2d(x, {1, 3});
  EXPECT_EQ(y.shape(), Shape({1, 1, 1, 3}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1.5, 3.0, 4.5}));
}

TEST(AdaptiveAvgPool2d, MatchesBinDefinition) {
  const Tensor x = testing::random_tensor({2, 3, 7, 5}, 1);
  for (auto [oh, ow] : {std::pair<int64_t, int64_t>{3, 2}, {1, 1}, {7, 5}, {4, 4}, {10, 3}}) {
    EXPECT_LT(closeness(adaptive_avg_pool2d(x, {oh, ow}), reference(x, oh, ow), 1e-12, 1e-12), 1.0)
        << oh << "x" << ow;
  }
  EXPECT_EQ(adaptive_avg_pool2d(x, {-1, 2}).shape(), Shape({2, 3, 7, 2}));
  EXPECT_EQ(adaptive_avg_pool2d(x, {3}).shape(), Shape({2, 3, 3, 3}));
  EXPECT_EQ(adaptive_avg_pool2d(x, {7, 5}).to_vector<double>(), x.to_vector<double>());
  const Tensor one = adaptive_avg_pool2d(x.select(0, 1), {2, 3});  // [C, H, W]
  EXPECT_EQ(one.shape(), Shape({3, 2, 3}));
  EXPECT_LT(closeness(one, reference(x, 2, 3).select(0, 1), 1e-12, 1e-12), 1.0);
}

// Output size 1 is the global pool (its kernels serve it), for [N, C, H, W] and [C, H, W] inputs.
TEST(AdaptiveAvgPool2d, OutputOfOneIsTheGlobalMean) {
  const Tensor x = testing::random_tensor({3, 4, 5, 6}, 5);
  const Tensor y = adaptive_avg_pool2d(x, {1});
  EXPECT_EQ(y.shape(), Shape({3, 4, 1, 1}));
  EXPECT_LT(closeness(y, reference(x, 1, 1), 1e-12, 1e-12), 1.0);
  const Tensor one = adaptive_avg_pool2d(x.select(0, 2), {1, 1});
  EXPECT_EQ(one.shape(), Shape({4, 1, 1}));
  EXPECT_LT(closeness(one, reference(x, 1, 1).select(0, 2), 1e-12, 1e-12), 1.0);
}

TEST(AdaptiveAvgPool2d, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 2, 5, 4}, 2).set_requires_grad(true);
  for (const std::vector<int64_t>& size : {std::vector<int64_t>{3, 3}, {1, 1}, {7, 6}, {2, 4}}) {
    EXPECT_TRUE(testing::gradcheck([&](const auto& in) { return adaptive_avg_pool2d(in[0], size); }, {x}))
        << shape_str(size);
  }
  const Tensor x3 = testing::random_tensor({2, 5, 4}, 3).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return adaptive_avg_pool2d(in[0], {3, 2}); }, {x3}));
}

TEST(AdaptiveAvgPool2d, NonContiguousInput) {
  const Tensor x = testing::random_tensor({1, 5, 6, 2}, 4).permute({0, 3, 1, 2});  // [1, 2, 5, 6]
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_EQ(adaptive_avg_pool2d(x, {3, 4}).to_vector<double>(),
            adaptive_avg_pool2d(x.contiguous(), {3, 4}).to_vector<double>());
}

TEST(AdaptiveAvgPool2d, Errors) {
  try {
    adaptive_avg_pool2d(Tensor::zeros({2, 3}), {1, 1});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(adaptive_avg_pool2d(Tensor::zeros({1, 1, 4, 4}), {0, 2}), ValueError);
  EXPECT_THROW(adaptive_avg_pool2d(Tensor::zeros({1, 1, 4, 4}), {1, 2, 3}), ValueError);
  EXPECT_THROW(adaptive_avg_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::i64), {2, 2}), DTypeError);
}

}  // namespace
}  // namespace liftoff
