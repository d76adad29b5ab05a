// group_norm on the CPU: values against a direct f64 loop, gradients against central differences, errors.
#include "ops/group_norm/group_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/common/gradcheck.h"
#include "tests/ops/layers_test_util.h"

namespace liftoff {
namespace {

Tensor naive_group_norm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b, double eps) {
  const int64_t n = x.size(0), c = x.size(1), inner = x.numel() / std::max<int64_t>(1, n * c);
  const int64_t count = c / groups * inner;
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> wv = w.defined() ? w.to_vector<double>() : std::vector<double>(c, 1.0);
  const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(c, 0.0);
  std::vector<double> out(xv.size());
  for (int64_t row = 0; row < n * groups; ++row) {
    const double* xr = xv.data() + row * count;
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < count; ++j) mean += xr[j] / static_cast<double>(count);
    for (int64_t j = 0; j < count; ++j) var += (xr[j] - mean) * (xr[j] - mean) / static_cast<double>(count);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t ch = row % groups * (c / groups) + j / inner;
      out[row * count + j] = (xr[j] - mean) / std::sqrt(var + eps) * wv[ch] + bv[ch];
    }
  }
  return Tensor::from_vector<double>(out, x.shape());
}

TEST(GroupNorm, HandComputed) {
  // One image, two channels of two values, one group: the four values 1, 2, 3, 4 (mean 2.5, var 1.25).
  const Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 2, 2});
  const Tensor w = Tensor::from_vector<double>({1, 2}, {2});
  const Tensor b = Tensor::from_vector<double>({0, 10}, {2});
  const std::vector<double> y = group_norm(x, 1, w, b, 0.0).to_vector<double>();
  const double r = 1.0 / std::sqrt(1.25);
  const std::vector<double> expected = {-1.5 * r, -0.5 * r, 10 + 2 * 0.5 * r, 10 + 2 * 1.5 * r};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], expected[i], 1e-12) << i;
}

TEST(GroupNorm, MatchesNaiveReference) {
  struct Case {
    Shape x;
    int64_t groups;
    bool affine;
  };
  const Case cases[] = {{{2, 6, 3, 4}, 3, true},
                        {{2, 6, 3, 4}, 6, true},
                        {{3, 4, 5}, 1, true},
                        {{2, 8}, 2, false},
                        {{1, 4, 2, 2, 2}, 2, true}};
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const Case& c : cases) {
      const Tensor x = testing::random_tensor(c.x, 1, -2, 3, dtype);
      const Tensor w = c.affine ? testing::random_tensor({c.x[1]}, 2, 0.5, 1.5, dtype) : Tensor();
      const Tensor b = c.affine ? testing::random_tensor({c.x[1]}, 3, -1, 1, dtype) : Tensor();
      const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(testing::all_close(group_norm(x, c.groups, w, b).to(DType::f64),
                                     naive_group_norm(x, c.groups, w, b, 1e-5), tol, tol))
          << dtype_name(dtype) << " " << shape_str(c.x) << " groups " << c.groups;
    }
  }
}

TEST(GroupNorm, Gradcheck) {
  const Tensor x = testing::random_tensor({2, 4, 3, 2}, 11).set_requires_grad(true);
  const Tensor w = testing::random_tensor({4}, 12, 0.5, 1.5).set_requires_grad(true);
  const Tensor b = testing::random_tensor({4}, 13).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return group_norm(in[0], 2, in[1], in[2]); }, {x, w, b}));
  // Instance norm (groups == C) of a 3-D input, weight only.
  const Tensor x3 = testing::random_tensor({2, 3, 5}, 16).set_requires_grad(true);
  const Tensor w3 = testing::random_tensor({3}, 17, 0.5, 1.5).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return group_norm(in[0], 3, in[1]); },
                                 {x3, w3}));
}

TEST(GroupNorm, NonContiguousInputGetsItsGradient) {
  // Instance norm (groups == C) on a permuted input, no affine parameters.
  const Tensor x = testing::random_tensor({2, 3, 3, 3}, 14).permute({0, 3, 1, 2}).set_requires_grad(true);
  testing::expect_strided_input_gradient([](const Tensor& in) { return group_norm(in, 3); }, x, 15);
}

TEST(GroupNorm, ErrorsNameTheShapes) {
  const Tensor x = Tensor::zeros({2, 6, 4, 4});
  testing::expect_error<ShapeError>([&] { group_norm(x, 4); },
                                    "input [2, 6, 4, 4] has 6 channels, not divisible by num_groups = 4");
  testing::expect_error<ShapeError>([&] { group_norm(x, 3, Tensor::ones({3})); },
                                    "weight [3] must be [6] for input [2, 6, 4, 4]");
  testing::expect_error<ShapeError>([&] { group_norm(Tensor::zeros({6}), 3); },
                                    "expected an input [N, C, *], got [6]");
  testing::expect_error<ValueError>([&] { group_norm(x, 0); }, "num_groups must be positive");
}

}  // namespace
}  // namespace liftoff
