#include "ops/softmax/softmax.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using Values = std::vector<double>;

Tensor t(const Values& values, const Shape& shape) {
  return Tensor::from_vector<double>(values, shape);
}

TEST(Softmax, KnownValues) {
  const Tensor x = t({0, std::log(3.0), 1, 1}, {2, 2});
  const Values y = softmax(x, 1).to_vector<double>();
  EXPECT_NEAR(y[0], 0.25, 1e-15);
  EXPECT_NEAR(y[1], 0.75, 1e-15);
  EXPECT_NEAR(y[2], 0.5, 1e-15);
  const Values ly = log_softmax(x, -1).to_vector<double>();
  EXPECT_NEAR(ly[0], std::log(0.25), 1e-15);
  EXPECT_NEAR(ly[3], std::log(0.5), 1e-15);
}

TEST(Softmax, AlongAnInnerDimension) {
  const Tensor x = testing::random_tensor({2, 3, 4}, 1, -3, 3);
  for (int64_t dim : {0, 1, 2}) {
    const Tensor y = softmax(x, dim);
    const Tensor ly = log_softmax(x, dim);
    const Values v = y.to_vector<double>();
    const Values lv = ly.to_vector<double>();
    const Values xv = x.to_vector<double>();
    const Shape& s = x.shape();
    const int64_t stride = dim == 0 ? 12 : (dim == 1 ? 4 : 1);
    for (int64_t i = 0; i < 24; ++i) {
      if ((i / stride) % s[static_cast<size_t>(dim)] != 0) continue;  // the first element of each slice
      double total = 0, m = -INFINITY;
      for (int64_t r = 0; r < s[static_cast<size_t>(dim)]; ++r)
        m = std::max(m, xv[static_cast<size_t>(i + r * stride)]);
      double z = 0;
      for (int64_t r = 0; r < s[static_cast<size_t>(dim)]; ++r)
        z += std::exp(xv[static_cast<size_t>(i + r * stride)] - m);
      for (int64_t r = 0; r < s[static_cast<size_t>(dim)]; ++r) {
        const size_t k = static_cast<size_t>(i + r * stride);
        total += v[k];
        EXPECT_NEAR(v[k], std::exp(xv[k] - m) / z, 1e-14);
        EXPECT_NEAR(lv[k], xv[k] - m - std::log(z), 1e-14);
      }
      EXPECT_NEAR(total, 1.0, 1e-14);
    }
  }
}

TEST(Softmax, StableForLargeInputsAndMinusInfinity) {
  const Values y = softmax(t({1000, 1000, -INFINITY}, {3}), 0).to_vector<double>();
  EXPECT_EQ(y, (Values{0.5, 0.5, 0}));
  const Values ly = log_softmax(t({-1000, 0}, {2}), 0).to_vector<double>();
  EXPECT_NEAR(ly[0], -1000, 1e-12);
  EXPECT_NEAR(ly[1], 0, 1e-12);
  EXPECT_EQ(softmax(Tensor::from_vector<float>({88.f, 89.f}, {2}), 0).dtype(), DType::f32);
  EXPECT_FALSE(std::isnan(softmax(Tensor::from_vector<float>({88.f, 89.f}, {2}), 0).to_vector<float>()[0]));
}

TEST(Softmax, Gradcheck) {
  const Tensor x = testing::random_tensor({3, 4, 2}, 2, -2, 2).set_requires_grad(true);
  for (int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(testing::gradcheck([dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {x}))
        << dim;
    EXPECT_TRUE(
        testing::gradcheck([dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {x}))
        << dim;
  }
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return softmax(in[0].permute({2, 0, 1}), 1);
      },
      {x}));
}

TEST(Softmax, ZeroDAndEmpty) {
  EXPECT_EQ(softmax(t({3}, {}), 0).item(), 1.0);
  EXPECT_EQ(log_softmax(t({3}, {}), -1).item(), 0.0);
  EXPECT_EQ(softmax(Tensor::zeros({0, 3}), 1).shape(), (Shape{0, 3}));
}

TEST(Softmax, Errors) {
  try {
    softmax(Tensor::zeros({2, 3}), 2);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("softmax: dimension 2 out of range for shape [2, 3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(log_softmax(Tensor::zeros({2}, DType::i64), 0), DTypeError);
  EXPECT_THROW(softmax(Tensor(), 0), ValueError);
}

}  // namespace
}  // namespace liftoff
