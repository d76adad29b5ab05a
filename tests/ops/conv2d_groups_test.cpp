// conv2d with groups (depthwise included) and dilation on the CPU: values against a direct f64 loop,
// gradients against central differences, errors naming the shapes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/conv2d/conv2d.h"
#include "tests/common/gradcheck.h"
#include "tests/ops/layers_test_util.h"

namespace liftoff {
namespace {

struct Geometry {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
};

// Direct grouped, dilated cross-correlation in double.
Tensor naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Geometry& g) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t k = w.size(0), cg = w.size(1), r = w.size(2), s = w.size(3), kg = k / g.groups;
  const int64_t oh = (h + 2 * g.padding - g.dilation * (r - 1) - 1) / g.stride + 1;
  const int64_t ow = (wd + 2 * g.padding - g.dilation * (s - 1) - 1) / g.stride + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(k, 0.0);
  std::vector<double> out(static_cast<size_t>(n * k * oh * ow));
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ik = 0; ik < k; ++ik)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = bv[ik];
          for (int64_t j = 0; j < cg; ++j) {
            const int64_t ic = ik / kg * cg + j;
            for (int64_t ir = 0; ir < r; ++ir)
              for (int64_t is = 0; is < s; ++is) {
                const int64_t ih = y * g.stride - g.padding + ir * g.dilation;
                const int64_t iw = xo * g.stride - g.padding + is * g.dilation;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                acc += xv[((in * c + ic) * h + ih) * wd + iw] * wv[((ik * cg + j) * r + ir) * s + is];
              }
          }
          out[((in * k + ik) * oh + y) * ow + xo] = acc;
        }
  return Tensor::from_vector<double>(out, {n, k, oh, ow});
}

struct Case {
  Shape x, w;
  bool bias;
  Geometry g;
};
const std::vector<Case> kCases = {
    {{2, 4, 7, 7}, {6, 2, 3, 3}, true, {1, 1, 1, 2}},     // two groups
    {{2, 6, 8, 7}, {6, 1, 3, 3}, true, {1, 1, 1, 6}},     // depthwise
    {{1, 4, 9, 9}, {8, 1, 3, 3}, false, {2, 1, 1, 4}},    // depthwise multiplier 2, stride 2
    {{2, 3, 9, 8}, {4, 3, 3, 2}, true, {1, 2, 2, 1}},     // dilation, one group
    {{1, 6, 10, 10}, {3, 2, 3, 3}, false, {2, 2, 2, 3}},  // groups, stride and dilation
    // The direct depthwise path (one channel per group): stride, dilation with a 3x2 kernel, a 5x5 kernel at
    // stride 3 without padding, padding 2 around a 3x3 kernel.
    {{2, 5, 9, 8}, {5, 1, 3, 3}, true, {2, 1, 1, 5}},
    {{1, 3, 10, 9}, {3, 1, 3, 2}, false, {1, 2, 2, 3}},
    {{2, 4, 6, 6}, {4, 1, 5, 5}, true, {3, 0, 1, 4}},
    {{1, 2, 4, 4}, {2, 1, 3, 3}, true, {1, 2, 1, 2}},
};

std::string describe(const Case& c) {
  return shape_str(c.x) + " * " + shape_str(c.w) + " stride " + std::to_string(c.g.stride) + " pad " +
         std::to_string(c.g.padding) + " dilation " + std::to_string(c.g.dilation) + " groups " +
         std::to_string(c.g.groups);
}

Tensor run(const std::vector<Tensor>& in, const Geometry& g) {
  return conv2d(in[0], in[1], in[2], g.stride, g.padding, g.dilation, g.groups);
}

TEST(Conv2dGroups, DepthwiseHandComputed) {
  // Two channels, each with its own 2x2 kernel: channel 0 sums its windows, channel 1 takes the top-left.
  const Tensor x =
      Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 3});
  const Tensor w = Tensor::from_vector<float>({1, 1, 1, 1, 1, 0, 0, 0}, {2, 1, 2, 2});
  EXPECT_EQ(conv2d(x, w, Tensor(), 1, 0, 1, 2).to_vector<float>(),
            (std::vector<float>{12, 16, 24, 28, 1, 2, 4, 5}));
  // Dilation 2 on the 3x3 image: one output, the four corners.
  EXPECT_EQ(conv2d(x, w, Tensor(), 1, 0, 2, 2).to_vector<float>(), (std::vector<float>{20, 1}));
}

TEST(Conv2dGroups, MatchesNaiveReference) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const Case& c : kCases) {
      const Tensor x = testing::random_tensor(c.x, 11, -1, 1, dtype);
      const Tensor w = testing::random_tensor(c.w, 12, -1, 1, dtype);
      const Tensor b = c.bias ? testing::random_tensor({c.w[0]}, 13, -1, 1, dtype) : Tensor();
      const Tensor y = run({x, w, b}, c.g);
      const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(testing::all_close(y.to(DType::f64), naive_conv2d(x, w, b, c.g), tol, tol))
          << dtype_name(dtype) << " " << describe(c);
    }
  }
}

TEST(Conv2dGroups, Gradcheck) {
  for (const Case& c : kCases) {
    const Tensor x = testing::random_tensor(c.x, 21).set_requires_grad(true);
    const Tensor w = testing::random_tensor(c.w, 22).set_requires_grad(true);
    const Tensor b = c.bias ? testing::random_tensor({c.w[0]}, 23).set_requires_grad(true) : Tensor();
    const Geometry g = c.g;
    EXPECT_TRUE(testing::gradcheck([g](const std::vector<Tensor>& in) { return run(in, g); }, {x, w, b}))
        << describe(c);
  }
}

TEST(Conv2dGroups, GroupsEqualSeparateConvolutions) {
  // groups = 2 is the two halves convolved separately and concatenated along channels.
  const Tensor x = testing::random_tensor({2, 4, 6, 6}, 31);
  const Tensor w = testing::random_tensor({6, 2, 3, 3}, 32);
  const std::vector<double> y = conv2d(x, w, Tensor(), 1, 1, 1, 2).to_vector<double>();
  const Tensor y0 = conv2d(x.slice(1, 0, 2).contiguous(), w.slice(0, 0, 3).contiguous(), Tensor(), 1, 1);
  const Tensor y1 = conv2d(x.slice(1, 2, 4).contiguous(), w.slice(0, 3, 6).contiguous(), Tensor(), 1, 1);
  const std::vector<double> a = y0.to_vector<double>(), b = y1.to_vector<double>();
  for (size_t i = 0; i < 2; ++i)  // per image: 3 channels of 6x6 from each half
    for (size_t q = 0; q < 108; ++q) {
      EXPECT_NEAR(y[i * 216 + q], a[i * 108 + q], 1e-12);
      EXPECT_NEAR(y[i * 216 + 108 + q], b[i * 108 + q], 1e-12);
    }
}

TEST(Conv2dGroups, NonContiguousInputGetsItsGradient) {
  const Tensor x = testing::random_tensor({2, 6, 6, 4}, 41).permute({0, 3, 1, 2}).set_requires_grad(true);
  const Tensor w = testing::random_tensor({4, 1, 3, 3}, 42);
  testing::expect_strided_input_gradient(
      [&](const Tensor& in) { return conv2d(in, w, Tensor(), 1, 1, 1, 4); }, x, 43);
}

TEST(Conv2dGroups, ErrorsNameTheShapes) {
  const Tensor x = Tensor::zeros({1, 6, 8, 8});
  testing::expect_error<ShapeError>(
      [&] {
        conv2d(x, Tensor::zeros({4, 2, 3, 3}), Tensor(), 1, 1, 1, 4);
      },
      "input [1, 6, 8, 8] has 6 channels and weight [4, 2, 3, 3] has 4 filters; both must "
      "be divisible by groups = 4");
  testing::expect_error<ShapeError>(
      [&] {
        conv2d(x, Tensor::zeros({6, 2, 3, 3}), Tensor(), 1, 1, 1, 2);
      },
      "weight [6, 2, 3, 3] expects 2 x groups (2) = 4");
  testing::expect_error<ValueError>(
      [&] {
        conv2d(x, Tensor::zeros({6, 1, 3, 3}), Tensor(), 1, 1, 1, 0);
      },
      "groups must be positive");
  testing::expect_error<ValueError>(
      [&] {
        conv2d(x, Tensor::zeros({6, 6, 3, 3}), Tensor(), 1, 1, 0, 1);
      },
      "dilation must be positive");
  // Dilation 4 makes a 3x3 kernel span 9 pixels: larger than the 8x8 image with padding 0.
  testing::expect_error<ShapeError>(
      [&] {
        conv2d(x, Tensor::zeros({6, 6, 3, 3}), Tensor(), 1, 0, 4, 1);
      },
      "is smaller than kernel 9x9");
}

}  // namespace
}  // namespace liftoff
