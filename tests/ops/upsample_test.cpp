#include "ops/upsample/upsample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

void expect_values(const Tensor& actual, const std::vector<double>& expected, double tol = 1e-6) {
  const std::vector<double> a = actual.to_vector<double>();
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], expected[i], tol) << "element " << i;
}

const Tensor k2x2 = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});

TEST(Interpolate, NearestByHand) {
  const Tensor y = interpolate(k2x2, {}, {2.0});
  EXPECT_EQ(y.shape(), Shape({1, 1, 4, 4}));
  expect_values(y, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // 2 -> 3: sources floor(d * 2/3) = 0, 0, 1.
  expect_values(interpolate(k2x2, {3, 3}), {1, 1, 2, 1, 1, 2, 3, 3, 4});
  // 4 -> 2 picks rows/columns 0 and 2; size {2, 4} keeps the width.
  const Tensor x =
      Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {1, 1, 4, 4});
  expect_values(interpolate(x, {2}), {0, 2, 8, 10});
  expect_values(interpolate(x, {2, 4}), {0, 1, 2, 3, 8, 9, 10, 11});
}

TEST(Interpolate, BilinearByHand) {
  // PyTorch's documented examples for a 2x2 input scaled by 2.
  expect_values(interpolate(k2x2, {}, {2.0}, "bilinear"),
                {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  const double t = 1.0 / 3.0;
  expect_values(interpolate(k2x2, {}, {2.0}, "bilinear", true),
                {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t,
                 3 + 2 * t, 4});
}

// Independent reference: PyTorch's bilinear definition written out per axis in double.
std::vector<std::pair<int64_t, double>> axis_weights(int64_t d, int64_t in, int64_t out, double scale,
                                                     bool align) {
  if (in == out) return {{d, 1.0}};
  double src = align ? scale * d : std::max(scale * (d + 0.5) - 0.5, 0.0);
  const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(src)), in - 1);
  const double l1 = std::min(std::max(src - static_cast<double>(i0), 0.0), 1.0);
  return {{i0, 1.0 - l1}, {std::min(i0 + 1, in - 1), l1}};
}

Tensor reference_bilinear(const Tensor& x, int64_t oh, int64_t ow, double sh, double sw, bool align) {
  const int64_t n = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double s = 0.0;
        for (auto [hi, hw] : axis_weights(i, h, oh, sh, align))
          for (auto [wi, ww] : axis_weights(j, w, ow, sw, align)) s += hw * ww * v[(p * h + hi) * w + wi];
        out.push_back(s);
      }
  return Tensor::from_vector<double>(out, {x.size(0), x.size(1), oh, ow});
}

TEST(Interpolate, BilinearMatchesDefinition) {
  const Tensor x = testing::random_tensor({2, 3, 5, 4}, 1);
  for (bool align : {false, true}) {
    for (auto [oh, ow] : {std::pair<int64_t, int64_t>{3, 2}, {7, 9}, {5, 11}, {1, 1}}) {
      const double sh = align ? (oh > 1 ? 4.0 / (oh - 1) : 0.0) : 5.0 / oh;
      const double sw = align ? (ow > 1 ? 3.0 / (ow - 1) : 0.0) : 4.0 / ow;
      const Tensor y = interpolate(x, {oh, ow}, {}, "bilinear", align);
      EXPECT_LT(closeness(y, reference_bilinear(x, oh, ow, sh, sw, align), 1e-12, 1e-12), 1.0)
          << oh << "x" << ow << " align " << align;
    }
  }
  // scale_factor: output floor(in * s), coordinates mapped with 1 / s (not in / out).
  const Tensor y = interpolate(x, {}, {1.7, 0.6}, "bilinear");
  EXPECT_EQ(y.shape(), Shape({2, 3, 8, 2}));
  EXPECT_LT(closeness(y, reference_bilinear(x, 8, 2, 1 / 1.7, 1 / 0.6, false), 1e-12, 1e-12), 1.0);
}

TEST(Interpolate, Gradcheck) {
  const Tensor x = testing::random_tensor({1, 2, 3, 4}, 2).set_requires_grad(true);
  for (const std::string mode : {"nearest", "bilinear"}) {
    for (const std::vector<int64_t>& size : {std::vector<int64_t>{5, 7}, {2, 3}, {6, 8}, {3, 4}}) {
      EXPECT_TRUE(testing::gradcheck([&](const auto& in) { return interpolate(in[0], size, {}, mode); }, {x}))
          << mode << " " << shape_str(size);
    }
  }
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& in) {
        return interpolate(in[0], {5, 2}, {}, "bilinear", true);
      },
      {x}));
  EXPECT_TRUE(
      testing::gradcheck([](const auto& in) { return interpolate(in[0], {}, {1.5}, "bilinear"); }, {x}));
}

TEST(Interpolate, NonContiguousInput) {
  const Tensor base = testing::random_tensor({1, 4, 3, 2}, 3);
  const Tensor x = base.permute({0, 3, 2, 1});  // [1, 2, 3, 4], strided
  ASSERT_FALSE(x.is_contiguous());
  for (const std::string mode : {"nearest", "bilinear"}) {
    EXPECT_EQ(interpolate(x, {5, 6}, {}, mode).to_vector<double>(),
              interpolate(x.contiguous(), {5, 6}, {}, mode).to_vector<double>());
  }
}

TEST(Interpolate, Errors) {
  const auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string rank = message([] { interpolate(Tensor::zeros({2, 3, 4}), {8, 8}); });
  EXPECT_NE(rank.find("[2, 3, 4]"), std::string::npos) << rank;
  EXPECT_THROW(interpolate(k2x2, {4, 4}, {2.0}), ValueError);
  EXPECT_THROW(interpolate(k2x2), ValueError);
  EXPECT_THROW(interpolate(k2x2, {4, 4}, {}, "bicubic"), ValueError);
  EXPECT_THROW(interpolate(k2x2, {4, 4}, {}, "nearest", false), ValueError);
  EXPECT_THROW(interpolate(k2x2, {4, 4, 4}), ValueError);
  EXPECT_THROW(interpolate(k2x2, {}, {0.2}), ShapeError);  // floor(2 * 0.2) = 0
  EXPECT_THROW(interpolate(k2x2, {}, {-1.0}), ValueError);
}

}  // namespace
}  // namespace liftoff
