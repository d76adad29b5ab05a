#include "ops/batch_norm2d/batch_norm2d.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/add/add.h"
#include "ops/relu/relu.h"
#include "runtime/autograd.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

struct ChannelStats {
  std::vector<double> mean, biased_var;
};

// Independent per-channel statistics straight from the [N, C, H, W] values.
ChannelStats stats_of(const Tensor& x) {
  const std::vector<double> v = x.to_vector<double>();
  const int64_t n = x.size(0), c = x.size(1), hw = x.size(2) * x.size(3);
  ChannelStats s{std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < hw; ++k) s.mean[ch] += v[(i * c + ch) * hw + k];
    s.mean[ch] /= static_cast<double>(n * hw);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < hw; ++k) {
        const double d = v[(i * c + ch) * hw + k] - s.mean[ch];
        s.biased_var[ch] += d * d;
      }
    s.biased_var[ch] /= static_cast<double>(n * hw);
  }
  return s;
}

TEST(BatchNorm2d, TrainingForwardAndRunningStats) {
  const Tensor x = testing::random_tensor({3, 2, 2, 3}, 1, -2, 3);
  const Tensor w = Tensor::from_vector<double>({1.5, -0.5}, {2});
  const Tensor b = Tensor::from_vector<double>({0.25, 1.0}, {2});
  const Tensor rm = Tensor::from_vector<double>({0.5, -1.0}, {2});
  const Tensor rv = Tensor::from_vector<double>({2.0, 0.5}, {2});
  const double eps = 1e-5, momentum = 0.1;
  const Tensor y = batch_norm2d(x, w, b, rm, rv, true, momentum, eps);
  const ChannelStats s = stats_of(x);
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  const std::vector<double> wv{1.5, -0.5}, bv{0.25, 1.0};
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t k = 0; k < 6; ++k) {
        const int64_t idx = (i * 2 + c) * 6 + k;
        const double expected = (xv[idx] - s.mean[c]) / std::sqrt(s.biased_var[c] + eps) * wv[c] + bv[c];
        EXPECT_NEAR(yv[idx], expected, 1e-12);
      }
  const double count = 18.0;
  const std::vector<double> rmv = rm.to_vector<double>(), rvv = rv.to_vector<double>();
  EXPECT_NEAR(rmv[0], 0.9 * 0.5 + 0.1 * s.mean[0], 1e-12);
  EXPECT_NEAR(rmv[1], 0.9 * -1.0 + 0.1 * s.mean[1], 1e-12);
  EXPECT_NEAR(rvv[0], 0.9 * 2.0 + 0.1 * s.biased_var[0] * count / (count - 1), 1e-12);
  EXPECT_NEAR(rvv[1], 0.9 * 0.5 + 0.1 * s.biased_var[1] * count / (count - 1), 1e-12);
}

TEST(BatchNorm2d, EvalUsesRunningStats) {
  const Tensor x = testing::random_tensor({2, 2, 1, 2}, 2);
  const Tensor w = Tensor::from_vector<float>({2.f, 1.f}, {2});
  const Tensor b = Tensor::from_vector<float>({0.f, -1.f}, {2});
  const Tensor rm = Tensor::from_vector<float>({0.5f, -0.5f}, {2});
  const Tensor rv = Tensor::from_vector<float>({4.f, 0.25f}, {2});
  const Tensor xf = x.to(DType::f32);
  const std::vector<float> y = batch_norm2d(xf, w, b, rm, rv, false, 0.1, 0.0001).to_vector<float>();
  const std::vector<float> xv = xf.to_vector<float>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t idx = (i * 2 + c) * 2 + k;
        const double mean = c == 0 ? 0.5 : -0.5, var = c == 0 ? 4.0 : 0.25, wc = c == 0 ? 2.0 : 1.0,
                     bc = c == 0 ? 0.0 : -1.0;
        EXPECT_NEAR(y[idx], (xv[idx] - mean) / std::sqrt(var + 0.0001) * wc + bc, 1e-5);
      }
  EXPECT_EQ(rm.to_vector<float>(), (std::vector<float>{0.5f, -0.5f}));  // untouched in eval
  EXPECT_EQ(rv.to_vector<float>(), (std::vector<float>{4.f, 0.25f}));
}

TEST(BatchNorm2d, GradcheckTraining) {
  const Tensor x = testing::random_tensor({2, 3, 2, 2}, 3).set_requires_grad(true);
  const Tensor w = testing::random_tensor({3}, 4, 0.5, 1.5).set_requires_grad(true);
  const Tensor b = testing::random_tensor({3}, 5).set_requires_grad(true);
  const Tensor rm = Tensor::zeros({3}, DType::f64), rv = Tensor::ones({3}, DType::f64);
  EXPECT_TRUE(testing::gradcheck(
      [rm, rv](const std::vector<Tensor>& in) { return batch_norm2d(in[0], in[1], in[2], rm, rv, true); },
      {x, w, b}));
  // Without running statistics too (nothing to update).
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return batch_norm2d(in[0], in[1], in[2], Tensor(), Tensor(), true);
      },
      {x, w, b}));
}

TEST(BatchNorm2dRelu, GradcheckWithAndWithoutResidual) {
  // Values spread well away from 0 after normalisation, so no finite-difference step crosses the ReLU's kink.
  const Tensor x = testing::random_tensor({2, 3, 2, 2}, 13).set_requires_grad(true);
  const Tensor w = testing::random_tensor({3}, 14, 0.5, 1.5).set_requires_grad(true);
  const Tensor b = testing::random_tensor({3}, 15).set_requires_grad(true);
  const Tensor r = testing::random_tensor({2, 3, 2, 2}, 16).set_requires_grad(true);
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return batch_norm2d_relu(in[0], in[1], in[2], Tensor(), Tensor(), true, 0.1, 1e-5, in[3]);
      },
      {x, w, b, r}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return batch_norm2d_relu(in[0], in[1], in[2], Tensor(), Tensor(), true);
      },
      {x, w, b}));
}

// The fused op is the three-op form, value for value, in f32 (forward, every gradient, running statistics).
TEST(BatchNorm2dRelu, EqualsBatchNormAddReluInF32) {
  for (bool with_residual : {false, true}) {
    auto make = [](uint64_t seed) {
      return std::vector<Tensor>{
          testing::random_tensor({4, 5, 6, 7}, seed, -1, 3, DType::f32).set_requires_grad(true),
          testing::random_tensor({5}, seed + 1, 0.5, 1.5, DType::f32).set_requires_grad(true),
          testing::random_tensor({5}, seed + 2, -1, 1, DType::f32).set_requires_grad(true),
          testing::random_tensor({4, 5, 6, 7}, seed + 3, -1, 1, DType::f32).set_requires_grad(true)};
    };
    const std::vector<Tensor> a = make(21), b = make(21);
    Tensor rm_a = Tensor::zeros({5}), rv_a = Tensor::ones({5}), rm_b = Tensor::zeros({5}),
           rv_b = Tensor::ones({5});
    const Tensor gy = testing::random_tensor({4, 5, 6, 7}, 40, -1, 1, DType::f32);
    const Tensor fused =
        batch_norm2d_relu(a[0], a[1], a[2], rm_a, rv_a, true, 0.1, 1e-5, with_residual ? a[3] : Tensor());
    Tensor plain = batch_norm2d(b[0], b[1], b[2], rm_b, rv_b, true);
    if (with_residual) plain = add(plain, b[3]);
    plain = relu(plain);
    EXPECT_TRUE(testing::all_close(fused, plain, 0, 0));
    fused.backward(gy);
    plain.backward(gy);
    for (size_t i = 0; i < (with_residual ? 4u : 3u); ++i) {
      EXPECT_TRUE(testing::all_close(a[i].grad(), b[i].grad(), 0, 0)) << "input " << i;
    }
    EXPECT_TRUE(testing::all_close(rm_a, rm_b, 0, 0));
    EXPECT_TRUE(testing::all_close(rv_a, rv_b, 0, 0));
  }
}

TEST(BatchNorm2dRelu, RejectsAResidualOfAnotherShape) {
  const Tensor x = Tensor::ones({2, 3, 4, 4}), w = Tensor::ones({3}), b = Tensor::zeros({3});
  EXPECT_THROW(batch_norm2d_relu(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5, Tensor::ones({2, 3, 4, 5})),
               ShapeError);
}

TEST(BatchNorm2d, GradcheckEval) {
  const Tensor x = testing::random_tensor({2, 2, 3, 1}, 6).set_requires_grad(true);
  const Tensor w = testing::random_tensor({2}, 7).set_requires_grad(true);
  const Tensor b = testing::random_tensor({2}, 8).set_requires_grad(true);
  const Tensor rm = Tensor::from_vector<double>({0.1, -0.2}, {2});
  const Tensor rv = Tensor::from_vector<double>({0.5, 2.0}, {2});
  EXPECT_TRUE(testing::gradcheck(
      [rm, rv](const std::vector<Tensor>& in) { return batch_norm2d(in[0], in[1], in[2], rm, rv, false); },
      {x, w, b}));
}

TEST(BatchNorm2d, RunningStatsStayOutOfAutograd) {
  const Tensor x = testing::random_tensor({2, 2, 2, 2}, 9).set_requires_grad(true);
  const Tensor w = Tensor::ones({2}, DType::f64), b = Tensor::zeros({2}, DType::f64);
  const Tensor rm = Tensor::zeros({2}, DType::f64), rv = Tensor::ones({2}, DType::f64);
  const Tensor y = batch_norm2d(x, w, b, rm, rv, true);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_TRUE(rm.is_leaf());
}

TEST(BatchNorm2d, RejectsBadArguments) {
  const Tensor x = Tensor::zeros({2, 3, 4, 4});
  const Tensor p = Tensor::ones({3});
  EXPECT_THROW(batch_norm2d(Tensor::zeros({2, 3, 4}), p, p, p, p, true), ShapeError);
  EXPECT_THROW(batch_norm2d(x, Tensor::ones({4}), p, p, p, true), ShapeError);
  EXPECT_THROW(batch_norm2d(x, p, p, Tensor::ones({2}), p, true), ShapeError);
  EXPECT_THROW(batch_norm2d(x, Tensor::ones({3}, DType::f64), p, p, p, true), DTypeError);
  EXPECT_THROW(batch_norm2d(x, p, Tensor::ones({3}, DType::f64), p, p, true), DTypeError);
  EXPECT_THROW(batch_norm2d(x, p, p, Tensor(), Tensor(), false), ValueError);
  EXPECT_THROW(batch_norm2d(x, p, p, p, Tensor(), true), ValueError);
  EXPECT_THROW(batch_norm2d(Tensor::zeros({1, 3, 1, 1}), p, p, p, p, true), ValueError);
  EXPECT_THROW(batch_norm2d(Tensor::zeros({2, 3, 4, 4}, DType::i32), p, p, p, p, true), DTypeError);
  EXPECT_THROW(batch_norm2d(x, p, p, p, p, true, 0.1, 0.0), ValueError);
}

}  // namespace
}  // namespace liftoff
