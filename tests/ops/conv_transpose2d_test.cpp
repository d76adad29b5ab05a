// conv_transpose2d on the CPU: values against a direct f64 scatter loop, the adjoint identity with conv2d,
// gradients against central differences, errors naming the shapes.
#include "ops/conv_transpose2d/conv_transpose2d.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/conv2d/conv2d.h"
#include "tests/common/gradcheck.h"
#include "tests/ops/layers_test_util.h"

namespace liftoff {
namespace {

struct Geometry {
  int64_t stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1;
};

// Each input pixel scatters weight-scaled copies into the output (the definition of a transposed conv).
Tensor naive_conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, const Geometry& g) {
  const int64_t n = x.size(0), cin = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t cog = w.size(1), r = w.size(2), s = w.size(3), cout = cog * g.groups, cig = cin / g.groups;
  const int64_t oh = (h - 1) * g.stride - 2 * g.padding + g.dilation * (r - 1) + g.output_padding + 1;
  const int64_t ow = (wd - 1) * g.stride - 2 * g.padding + g.dilation * (s - 1) + g.output_padding + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(n * cout * oh * ow), 0.0);
  if (b.defined()) {
    const std::vector<double> bv = b.to_vector<double>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = bv[(i / static_cast<size_t>(oh * ow)) % cout];
  }
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < wd; ++ix)
          for (int64_t j = 0; j < cog; ++j)
            for (int64_t ky = 0; ky < r; ++ky)
              for (int64_t kx = 0; kx < s; ++kx) {
                const int64_t oy = iy * g.stride - g.padding + ky * g.dilation;
                const int64_t ox = ix * g.stride - g.padding + kx * g.dilation;
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                const int64_t co = ci / cig * cog + j;
                out[((in * cout + co) * oh + oy) * ow + ox] +=
                    xv[((in * cin + ci) * h + iy) * wd + ix] * wv[((ci * cog + j) * r + ky) * s + kx];
              }
  return Tensor::from_vector<double>(out, {n, cout, oh, ow});
}

struct Case {
  Shape x, w;
  bool bias;
  Geometry g;
};
const std::vector<Case> kCases = {
    {{2, 3, 4, 5}, {3, 2, 3, 3}, true, {1, 0, 0, 1, 1}},   // stride 1, no padding: the output grows
    {{2, 4, 4, 4}, {4, 3, 3, 3}, true, {2, 1, 1, 1, 1}},   // the usual 2x upsampling (3x3, pad 1, op 1)
    {{1, 4, 3, 4}, {4, 2, 4, 4}, false, {2, 1, 0, 1, 1}},  // 4x4 kernel, stride 2
    {{2, 4, 3, 3}, {4, 1, 3, 2}, true, {2, 1, 1, 2, 1}},   // two groups, rectangular kernel
    {{1, 3, 4, 4}, {3, 1, 3, 3}, false, {1, 1, 0, 3, 1}},  // depthwise
    {{1, 2, 3, 4}, {2, 2, 3, 3}, true, {2, 2, 1, 1, 2}},   // dilation
    {{1, 2, 5, 5}, {2, 2, 3, 3}, false, {1, 3, 0, 1, 1}},  // padding as large as the kernel crops
};

std::string describe(const Case& c) {
  return shape_str(c.x) + " w " + shape_str(c.w) + " stride " + std::to_string(c.g.stride) + " pad " +
         std::to_string(c.g.padding) + " out_pad " + std::to_string(c.g.output_padding) + " groups " +
         std::to_string(c.g.groups) + " dilation " + std::to_string(c.g.dilation);
}

Tensor run(const std::vector<Tensor>& in, const Geometry& g) {
  return conv_transpose2d(in[0], in[1], in[2], g.stride, g.padding, g.output_padding, g.groups, g.dilation);
}

TEST(ConvTranspose2d, HandComputed) {
  // A 2x2 input, 2x2 kernel of ones, stride 2: each pixel becomes a 2x2 block.
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  const Tensor w = Tensor::ones({1, 1, 2, 2});
  EXPECT_EQ(conv_transpose2d(x, w, Tensor(), 2).to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // Stride 1: the blocks overlap and add; bias 0.5 everywhere.
  EXPECT_EQ(conv_transpose2d(x, w, Tensor::from_vector<float>({0.5f}, {1})).to_vector<float>(),
            (std::vector<float>{1.5f, 3.5f, 2.5f, 4.5f, 10.5f, 6.5f, 3.5f, 7.5f, 4.5f}));
}

TEST(ConvTranspose2d, MatchesNaiveReference) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const Case& c : kCases) {
      const Tensor x = testing::random_tensor(c.x, 11, -1, 1, dtype);
      const Tensor w = testing::random_tensor(c.w, 12, -1, 1, dtype);
      const int64_t cout = c.w[1] * c.g.groups;
      const Tensor b = c.bias ? testing::random_tensor({cout}, 13, -1, 1, dtype) : Tensor();
      const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(testing::all_close(run({x, w, b}, c.g).to(DType::f64), naive_conv_transpose2d(x, w, b, c.g),
                                     tol, tol))
          << dtype_name(dtype) << " " << describe(c);
    }
  }
}

TEST(ConvTranspose2d, IsTheAdjointOfConv2d) {
  // <conv_transpose2d(x, w), y> == <x, conv2d(y, w)> for the same geometry (output_padding 1 included).
  const Tensor x = testing::random_tensor({2, 4, 4, 4}, 51);
  const Tensor w = testing::random_tensor({4, 3, 3, 3}, 52);
  const Tensor t = conv_transpose2d(x, w, Tensor(), 2, 1, 1);
  ASSERT_EQ(t.shape(), Shape({2, 3, 8, 8}));
  const Tensor y = testing::random_tensor(t.shape(), 53);
  const Tensor c = conv2d(y, w, Tensor(), 2, 1);
  ASSERT_EQ(c.shape(), x.shape());
  const std::vector<double> tv = t.to_vector<double>(), yv = y.to_vector<double>();
  const std::vector<double> xv = x.to_vector<double>(), cv = c.to_vector<double>();
  double lhs = 0.0, rhs = 0.0;
  for (size_t i = 0; i < tv.size(); ++i) lhs += tv[i] * yv[i];
  for (size_t i = 0; i < xv.size(); ++i) rhs += xv[i] * cv[i];
  EXPECT_NEAR(lhs, rhs, 1e-10);
}

TEST(ConvTranspose2d, Gradcheck) {
  for (const Case& c : kCases) {
    const Tensor x = testing::random_tensor(c.x, 21).set_requires_grad(true);
    const Tensor w = testing::random_tensor(c.w, 22).set_requires_grad(true);
    const Tensor b =
        c.bias ? testing::random_tensor({c.w[1] * c.g.groups}, 23).set_requires_grad(true) : Tensor();
    const Geometry g = c.g;
    EXPECT_TRUE(testing::gradcheck([g](const std::vector<Tensor>& in) { return run(in, g); }, {x, w, b}))
        << describe(c);
  }
}

TEST(ConvTranspose2d, NonContiguousInputGetsItsGradient) {
  const Tensor x = testing::random_tensor({1, 4, 4, 2}, 41).permute({0, 3, 1, 2}).set_requires_grad(true);
  const Tensor w = testing::random_tensor({2, 3, 3, 3}, 42);
  testing::expect_strided_input_gradient(
      [&](const Tensor& in) { return conv_transpose2d(in, w, Tensor(), 2, 1, 1); }, x, 43);
}

TEST(ConvTranspose2d, ErrorsNameTheShapes) {
  const Tensor x = Tensor::zeros({1, 6, 4, 4});
  testing::expect_error<ShapeError>(
      [&] {
        conv_transpose2d(x, Tensor::zeros({6, 2, 3, 3}), Tensor(), 1, 0, 0, 4);
      },
      "input [1, 6, 4, 4] has 6 channels, not divisible by groups = 4");
  testing::expect_error<ShapeError>(
      [&] {
        conv_transpose2d(x, Tensor::zeros({4, 2, 3, 3}));
      },
      "input [1, 6, 4, 4] has 6 channels but weight [4, 2, 3, 3] expects 4");
  testing::expect_error<ShapeError>(
      [&] {
        conv_transpose2d(x, Tensor::zeros({6, 2, 3, 3}), Tensor::zeros({3}));
      },
      "bias [3] does not match weight [6, 2, 3, 3] with groups 1; expected [2]");
  testing::expect_error<ValueError>(
      [&] {
        conv_transpose2d(x, Tensor::zeros({6, 2, 3, 3}), Tensor(), 2, 1, 2);
      },
      "output_padding 2 must be smaller than stride 2");
  testing::expect_error<ShapeError>(
      [&] {
        conv_transpose2d(x, Tensor::zeros({6, 2, 1, 1}), Tensor(), 1, 2);
      },
      "gives an empty output");
  testing::expect_error<DTypeError>(
      [&] {
        conv_transpose2d(x, Tensor::zeros({6, 2, 3, 3}, DType::f64));
      },
      "but weight [6, 2, 3, 3] is f64");
}

}  // namespace
}  // namespace liftoff
