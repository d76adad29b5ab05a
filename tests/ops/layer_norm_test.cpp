// layer_norm on the CPU: values against a direct f64 loop, gradients against central differences,
// non-contiguous input, errors naming the shapes.
#include "ops/layer_norm/layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/common/gradcheck.h"
#include "tests/ops/layers_test_util.h"

namespace liftoff {
namespace {

// rows x cols in double; weight/bias per column (or none).
Tensor naive_layer_norm(const Tensor& x, int64_t cols, const Tensor& w, const Tensor& b, double eps) {
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> wv = w.defined() ? w.to_vector<double>() : std::vector<double>(cols, 1.0);
  const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(cols, 0.0);
  std::vector<double> out(xv.size());
  for (size_t row = 0; row < xv.size() / static_cast<size_t>(cols); ++row) {
    const double* xr = xv.data() + row * cols;
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < cols; ++j) mean += xr[j] / static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean) / static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j)
      out[row * cols + j] = (xr[j] - mean) / std::sqrt(var + eps) * wv[j] + bv[j];
  }
  return Tensor::from_vector<double>(out, x.shape());
}

TEST(LayerNorm, HandComputed) {
  // [1, 2, 3]: mean 2, variance 2/3 -> (-1, 0, 1) * sqrt(3/2); then * 2 + 1.
  const Tensor x = Tensor::from_vector<double>({1, 2, 3}, {1, 3});
  const std::vector<double> y =
      layer_norm(x, {3}, Tensor::full({3}, 2.0, DType::f64), Tensor::ones({3}, DType::f64), 0.0)
          .to_vector<double>();
  const double k = std::sqrt(1.5);
  EXPECT_NEAR(y[0], 1 - 2 * k, 1e-12);
  EXPECT_NEAR(y[1], 1.0, 1e-12);
  EXPECT_NEAR(y[2], 1 + 2 * k, 1e-12);
}

TEST(LayerNorm, MatchesNaiveReference) {
  struct Case {
    Shape x, normalized;
    bool affine;
  };
  const Case cases[] = {{{4, 7}, {7}, true},
                        {{2, 3, 5}, {3, 5}, true},
                        {{3, 1, 6}, {6}, false},
                        {{2, 2, 2, 3}, {2, 2, 3}, true},
                        {{5}, {5}, true}};
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const Case& c : cases) {
      const Tensor x = testing::random_tensor(c.x, 1, -2, 3, dtype);
      const Tensor w = c.affine ? testing::random_tensor(c.normalized, 2, 0.5, 1.5, dtype) : Tensor();
      const Tensor b = c.affine ? testing::random_tensor(c.normalized, 3, -1, 1, dtype) : Tensor();
      const Tensor y = layer_norm(x, c.normalized, w, b, 1e-5);
      EXPECT_EQ(y.shape(), c.x);
      EXPECT_EQ(y.dtype(), dtype);
      const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(testing::all_close(y.to(DType::f64),
                                     naive_layer_norm(x, shape_numel(c.normalized), w, b, 1e-5), tol, tol))
          << dtype_name(dtype) << " " << shape_str(c.x) << " over " << shape_str(c.normalized);
    }
  }
}

TEST(LayerNorm, Gradcheck) {
  const Tensor x = testing::random_tensor({3, 2, 4}, 11).set_requires_grad(true);
  const Tensor w = testing::random_tensor({2, 4}, 12, 0.5, 1.5).set_requires_grad(true);
  const Tensor b = testing::random_tensor({2, 4}, 13).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return layer_norm(in[0], {2, 4}, in[1], in[2], 1e-5);
      },
      {x, w, b}));
  // No affine parameters, one normalised dim.
  const Tensor x2 = testing::random_tensor({4, 5}, 14).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], {5}); }, {x2}));
}

TEST(LayerNorm, NonContiguousInputGetsItsGradient) {
  const Tensor x = testing::random_tensor({6, 3}, 21).permute({1, 0}).set_requires_grad(true);  // [3, 6]
  const Tensor w = testing::random_tensor({6}, 22);
  testing::expect_strided_input_gradient([&](const Tensor& in) { return layer_norm(in, {6}, w); }, x, 23);
}

TEST(LayerNorm, EmptyBatchGivesZeroParameterGradients) {
  const Tensor x = Tensor::zeros({0, 4}, DType::f64).set_requires_grad(true);
  const Tensor w = Tensor::ones({4}, DType::f64).set_requires_grad(true);
  const Tensor y = layer_norm(x, {4}, w);
  EXPECT_EQ(y.shape(), Shape({0, 4}));
  y.backward(Tensor::zeros({0, 4}, DType::f64));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 0}));
}

TEST(LayerNorm, ErrorsNameTheShapes) {
  const Tensor x = Tensor::zeros({2, 3, 4});
  testing::expect_error<ShapeError>([&] { layer_norm(x, {3}); },
                                    "normalized_shape [3] must be the last sizes of input [2, 3, 4]");
  testing::expect_error<ShapeError>([&] { layer_norm(x, {1, 2, 3, 4}); }, "normalized_shape [1, 2, 3, 4]");
  testing::expect_error<ShapeError>([&] { layer_norm(x, {4}, Tensor::ones({3})); },
                                    "weight [3] must have normalized_shape [4] (input [2, 3, 4])");
  testing::expect_error<DTypeError>([&] { layer_norm(x, {4}, Tensor(), Tensor::ones({4}, DType::f64)); },
                                    "but bias [4] is f64");
}

}  // namespace
}  // namespace liftoff
