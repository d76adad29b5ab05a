#include "ops/conv2d/conv2d.h"

#include <gtest/gtest.h>

#include <cmath>

#include <string>
#include <vector>

#include "ops/binary/binary.h"
#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Direct 7-loop cross-correlation in double, independent of the im2col kernel.
Tensor naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t pad) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t k = w.size(0), r = w.size(2), s = w.size(3);
  const int64_t oh = (h + 2 * pad - r) / stride + 1, ow = (wd + 2 * pad - s) / stride + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(k, 0.0);
  std::vector<double> out(static_cast<size_t>(n * k * oh * ow));
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ik = 0; ik < k; ++ik)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = bv[ik];
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t ir = 0; ir < r; ++ir)
              for (int64_t is = 0; is < s; ++is) {
                const int64_t ih = y * stride - pad + ir, iw = xo * stride - pad + is;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                acc += xv[((in * c + ic) * h + ih) * wd + iw] * wv[((ik * c + ic) * r + ir) * s + is];
              }
          out[((in * k + ik) * oh + y) * ow + xo] = acc;
        }
  return Tensor::from_vector<double>(out, {n, k, oh, ow});
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

TEST(Conv2d, HandComputed) {
  // 3x3 image 1..9, 2x2 kernel of ones, no padding: window sums.
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  const Tensor w = Tensor::ones({1, 1, 2, 2});
  const Tensor b = Tensor::from_vector<float>({0.5f}, {1});
  EXPECT_EQ(conv2d(x, w, b).to_vector<float>(), (std::vector<float>{12.5f, 16.5f, 24.5f, 28.5f}));
  // Padding 1, stride 2: corners see a 2x2 patch of the image.
  EXPECT_EQ(conv2d(x, w, Tensor(), 2, 1).to_vector<float>(), (std::vector<float>{1, 5, 11, 28}));
}

struct Case {
  Shape x, w;
  bool bias;
  int64_t stride, padding;
};

const std::vector<Case> kCases = {
    {{2, 3, 7, 7}, {4, 3, 3, 3}, true, 1, 1},   // ResNet 3x3
    {{3, 4, 8, 8}, {5, 4, 3, 3}, true, 2, 1},   // stride 2 downsampling, odd batch over threads
    {{2, 4, 8, 8}, {6, 4, 1, 1}, false, 2, 0},  // 1x1 projection shortcut
    {{2, 3, 5, 5}, {2, 3, 1, 1}, true, 1, 0},   // pointwise (no im2col)
    {{2, 2, 5, 6}, {3, 2, 2, 3}, true, 2, 1},   // rectangular kernel, non-square image
    {{1, 1, 6, 5}, {2, 1, 3, 3}, false, 3, 2},  // stride larger than padding, big padding
};

TEST(Conv2d, MatchesNaiveReference) {
  for (const Case& c : kCases) {
    for (DType dt : {DType::f32, DType::f64}) {
      const Tensor x = testing::random_tensor(c.x, 11, -1, 1, dt);
      const Tensor w = testing::random_tensor(c.w, 12, -1, 1, dt);
      const Tensor b = c.bias ? testing::random_tensor({c.w[0]}, 13, -1, 1, dt) : Tensor();
      const Tensor expected = naive_conv2d(x, w, b, c.stride, c.padding);
      const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(testing::all_close(conv2d(x, w, b, c.stride, c.padding).to(DType::f64), expected, tol, tol))
          << shape_str(c.x) << " * " << shape_str(c.w) << " stride " << c.stride << " pad " << c.padding;
    }
  }
}

TEST(Conv2d, Gradcheck) {
  for (const Case& c : kCases) {
    const Tensor x = testing::random_tensor(c.x, 21).set_requires_grad(true);
    const Tensor w = testing::random_tensor(c.w, 22).set_requires_grad(true);
    const Tensor b = c.bias ? testing::random_tensor({c.w[0]}, 23).set_requires_grad(true) : Tensor();
    const int64_t stride = c.stride, padding = c.padding;
    EXPECT_TRUE(testing::gradcheck(
        [stride, padding](const std::vector<Tensor>& in) {
          return conv2d(in[0], in[1], in[2], stride, padding);
        },
        {x, w, b}))
        << shape_str(c.x) << " * " << shape_str(c.w) << " stride " << c.stride << " pad " << c.padding;
  }
}

TEST(Conv2d, GradientOfOneInputOnly) {
  // Only the weight requires grad: backward must not need the (unsaved) weight for an input gradient.
  const Tensor x = testing::random_tensor({2, 3, 6, 6}, 31);
  const Tensor w = testing::random_tensor({4, 3, 3, 3}, 32).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], Tensor(), 1, 1); }, {x, w}));
  const Tensor x2 = testing::random_tensor({2, 3, 6, 6}, 33).set_requires_grad(true);
  const Tensor w2 = testing::random_tensor({4, 3, 3, 3}, 34);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], Tensor(), 2, 1); }, {x2, w2}));
}

TEST(Conv2d, NonContiguousInputGetsItsGradient) {
  // A strided leaf: the op computes on a contiguous copy but must route the gradient to the caller's tensor.
  const Tensor base = testing::random_tensor({2, 6, 6, 3}, 41);
  const Tensor x = base.permute({0, 3, 1, 2}).set_requires_grad(true);
  ASSERT_FALSE(x.is_contiguous());
  const Tensor w = testing::random_tensor({4, 3, 3, 3}, 42);
  const Tensor gy = testing::random_tensor({2, 4, 6, 6}, 43);
  conv2d(x, w, Tensor(), 1, 1).backward(gy);
  const Tensor x_copy = x.detach().contiguous().set_requires_grad(true);
  conv2d(x_copy, w, Tensor(), 1, 1).backward(gy);
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(testing::all_close(x.grad(), x_copy.grad(), 1e-12, 1e-12));
}

// A residual block's input gets two gradients: the skip path's arrives first, and the convolution adds its
// input gradient into it (waiting_gradient). The sum equals the two gradients taken one backward at a time.
TEST(Conv2d, InputGradientAddsIntoTheSkipPathsGradient) {
  const Shape shape{2, 3, 6, 5};
  const Tensor x = testing::random_tensor(shape, 11).set_requires_grad(true);
  const Tensor w = testing::random_tensor({3, 3, 3, 3}, 12, -0.5, 0.5);
  const Tensor ones = Tensor::ones(shape, DType::f64);
  // add's backward pushes the convolution's node first; the engine runs the skip path's mul first.
  const Tensor h = mul(x, 2.0);
  add(conv2d(h, w, Tensor(), 1, 1), mul(h, 3.0)).backward(ones);

  const Tensor x_apart = x.detach().clone().set_requires_grad(true);
  conv2d(mul(x_apart, 2.0), w, Tensor(), 1, 1).backward(ones);
  mul(mul(x_apart, 2.0), 3.0).backward(ones);
  EXPECT_TRUE(testing::all_close(x.grad(), x_apart.grad(), 1e-12, 1e-12));
}

TEST(Conv2d, EmptyBatch) {
  const Tensor x = Tensor::zeros({0, 3, 5, 5}, DType::f64).set_requires_grad(true);
  const Tensor w = testing::random_tensor({4, 3, 3, 3}, 51).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4}, 52).set_requires_grad(true);
  const Tensor y = conv2d(x, w, b, 1, 1);
  EXPECT_EQ(y.shape(), (Shape{0, 4, 5, 5}));
  y.backward(Tensor::zeros({0, 4, 5, 5}, DType::f64));
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(108, 0.0));
  EXPECT_EQ(b.grad().to_vector<double>(), std::vector<double>(4, 0.0));
}

TEST(Conv2d, RejectsBadArguments) {
  const Tensor x = Tensor::zeros({2, 3, 8, 8});
  const Tensor w = Tensor::zeros({16, 3, 3, 3});
  expect_error<ShapeError>([&] { conv2d(Tensor::zeros({3, 8, 8}), w, Tensor()); }, "4-D input");
  expect_error<ShapeError>([&] { conv2d(x, Tensor::zeros({16, 3, 3}), Tensor()); }, "4-D weight");
  expect_error<ShapeError>(
      [&] {
        conv2d(x, Tensor::zeros({16, 1, 3, 3}), Tensor());
      },
      "has 3 channels but weight [16, 1, 3, 3] expects 1");
  expect_error<ShapeError>([&] { conv2d(x, Tensor::zeros({0, 3, 3, 3}), Tensor()); }, "positive sizes");
  expect_error<ShapeError>([&] { conv2d(x, Tensor::zeros({16, 3, 0, 3}), Tensor()); }, "positive sizes");
  expect_error<ShapeError>([&] { conv2d(x, w, Tensor::zeros({8})); }, "bias [8]");
  expect_error<ShapeError>([&] { conv2d(x, w, Tensor::zeros({16, 1})); }, "bias [16, 1]");
  expect_error<ValueError>([&] { conv2d(x, w, Tensor(), 0, 1); }, "stride must be positive");
  expect_error<ValueError>([&] { conv2d(x, w, Tensor(), -2, 1); }, "stride must be positive");
  expect_error<ValueError>([&] { conv2d(x, w, Tensor(), 1, -1); }, "padding must be non-negative");
  expect_error<ValueError>([&] { conv2d(x, w, Tensor(), 1, 3); }, "padding 3 is too large");
  expect_error<ShapeError>(
      [&] {
        conv2d(Tensor::zeros({2, 3, 2, 8}), w, Tensor());
      },
      "output would be empty");
  expect_error<DTypeError>(
      [&] {
        conv2d(x, Tensor::zeros({16, 3, 3, 3}, DType::f64), Tensor());
      },
      "is f32 but weight [16, 3, 3, 3] is f64");
  expect_error<DTypeError>([&] { conv2d(x, w, Tensor::zeros({16}, DType::f64)); }, "bias [16] is f64");
  expect_error<DTypeError>(
      [&] {
        conv2d(Tensor::zeros({2, 3, 8, 8}, DType::i64), w, Tensor());
      },
      "floating dtype");
  // f16 exists on CUDA only: the CPU kernel names the op and the dtype.
  expect_error<DTypeError>(
      [&] {
        conv2d(Tensor::zeros({2, 3, 8, 8}, DType::f16), Tensor::zeros({16, 3, 3, 3}, DType::f16), Tensor());
      },
      "conv2d");
  expect_error<ValueError>([&] { conv2d(Tensor(), w, Tensor()); }, "input tensor is undefined");
}

}  // namespace
}  // namespace liftoff

namespace liftoff {
namespace {
// The f32 fast paths (implicit im2col for stride-1 "same" 3x3, phase split for stride-2 3x3 including odd and
// tiny sizes, per-thread GEMMs) against the same convolution in f64, forward and all three gradients;
// gradcheck covers only the f64 kernels.
TEST(Conv2d, F32FastPathsMatchF64) {
  struct Case {
    int64_t n, c, h, k, r, stride, padding;
  };
  for (const Case& cs : {Case{8, 16, 14, 16, 3, 1, 1}, Case{6, 3, 9, 8, 3, 1, 1},
                         Case{4, 16, 14, 32, 3, 2, 1}, Case{4, 8, 10, 16, 1, 2, 0},
                         Case{5, 4, 11, 6, 5, 1, 2}, Case{3, 8, 13, 16, 3, 2, 1}, Case{4, 5, 7, 9, 3, 2, 1},
                         Case{3, 3, 2, 4, 3, 2, 1}, Case{2, 4, 1, 3, 3, 2, 1}, Case{2, 3, 35, 4, 3, 2, 1}}) {
    const Tensor x64 = testing::random_tensor({cs.n, cs.c, cs.h, cs.h}, 21).set_requires_grad(true);
    const Tensor w64 = testing::random_tensor({cs.k, cs.c, cs.r, cs.r}, 22).set_requires_grad(true);
    const Tensor b64 = testing::random_tensor({cs.k}, 23).set_requires_grad(true);
    const Tensor x32 = x64.detach().to(DType::f32).set_requires_grad(true);
    const Tensor w32 = w64.detach().to(DType::f32).set_requires_grad(true);
    const Tensor b32 = b64.detach().to(DType::f32).set_requires_grad(true);
    const Tensor y64 = conv2d(x64, w64, b64, cs.stride, cs.padding);
    const Tensor y32 = conv2d(x32, w32, b32, cs.stride, cs.padding);
    const Tensor gy = testing::random_tensor(y64.shape(), 24);
    y64.backward(gy);
    y32.backward(gy.to(DType::f32));
    const double tol = 1e-4 * std::sqrt(static_cast<double>(cs.c * cs.r * cs.r * cs.n));
    EXPECT_TRUE(testing::all_close(y32, y64, tol, 1e-4)) << "forward, case n=" << cs.n << " c=" << cs.c;
    EXPECT_TRUE(testing::all_close(x32.grad(), x64.grad(), tol, 1e-4)) << "grad x, case c=" << cs.c;
    EXPECT_TRUE(testing::all_close(w32.grad(), w64.grad(), tol, 1e-4)) << "grad w, case c=" << cs.c;
    EXPECT_TRUE(testing::all_close(b32.grad(), b64.grad(), tol, 1e-4)) << "grad b, case c=" << cs.c;
  }
}
}  // namespace
}  // namespace liftoff
