// The layers around the newer ops: shapes, PyTorch's parameter names and initialisation, values, and
// gradchecks in f64 on tiny sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/layers.h"
#include "ops/ops.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using testing::random_tensor;

// Every element within [-bound, bound], and spread over most of it (a uniform init, not a constant).
void expect_uniform_within(const Tensor& t, double bound) {
  const std::vector<double> v = t.to_vector<double>();
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_GE(*lo, -bound);
  EXPECT_LE(*hi, bound);
  EXPECT_LT(*lo, -0.7 * bound);
  EXPECT_GT(*hi, 0.7 * bound);
}

std::vector<std::string> parameter_names(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.push_back(name);
  return names;
}

// Gradcheck of module.forward(x) in f64 with respect to x (when it is floating) and every parameter.
::testing::AssertionResult gradcheck_module(Module& module, const Tensor& x) {
  module.to(DType::f64);
  std::vector<Tensor> inputs{x};
  if (is_floating(x.dtype())) x.set_requires_grad(true);
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  GradcheckOptions options;
  for (size_t i = is_floating(x.dtype()) ? 0 : 1; i < inputs.size(); ++i) options.check_inputs.push_back(i);
  return testing::gradcheck([&](const std::vector<Tensor>& in) { return module.forward(in[0]); }, inputs,
                            options);
}

TEST(Modules, Conv2dDilationAndGroups) {
  Generator gen(1);
  Conv2d conv(4, 6, 3, 1, 2, true, gen, /*dilation=*/2, /*groups=*/2);
  EXPECT_EQ(conv.weight().shape(), (Shape{6, 2, 3, 3}));
  expect_uniform_within(conv.weight(), 1.0 / std::sqrt(2.0 * 9.0));  // fan_in = in/groups * k * k
  // (7 + 2*2 - 2*2 - 1)/1 + 1 = 7.
  EXPECT_EQ(conv.forward(random_tensor({2, 4, 7, 7}, 1, -1, 1, DType::f32)).shape(), (Shape{2, 6, 7, 7}));
  Conv2d depthwise(4, 4, 3, 2, 1, false, gen, 1, 4);
  EXPECT_EQ(depthwise.weight().shape(), (Shape{4, 1, 3, 3}));
  EXPECT_EQ(depthwise.forward(random_tensor({1, 4, 6, 6}, 2, -1, 1, DType::f32)).shape(),
            (Shape{1, 4, 3, 3}));
  EXPECT_THROW(Conv2d(4, 6, 3, 1, 1, false, gen, 1, 4), ValueError);  // 6 % 4 != 0
  EXPECT_THROW(Conv2d(4, 4, 3, 1, 1, false, gen, 0, 1), ValueError);
  EXPECT_TRUE(gradcheck_module(conv, random_tensor({1, 4, 5, 5}, 3)));
  EXPECT_TRUE(gradcheck_module(depthwise, random_tensor({1, 4, 4, 4}, 4)));
}

TEST(Modules, ConvTranspose2d) {
  Generator gen(2);
  ConvTranspose2d up(4, 6, 3, 2, 1, 1, true, gen, 2);
  EXPECT_EQ(parameter_names(up), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(up.weight().shape(), (Shape{4, 3, 3, 3}));
  expect_uniform_within(up.weight(), 1.0 / std::sqrt(3.0 * 9.0));  // fan_in = out/groups * k * k
  for (const float b : up.bias().to_vector<float>()) EXPECT_LE(std::abs(b), 1.0 / std::sqrt(3.0 * 9.0));
  // (4 - 1)*2 - 2*1 + (3 - 1) + 1 + 1 = 8.
  EXPECT_EQ(up.forward(random_tensor({2, 4, 4, 4}, 1, -1, 1, DType::f32)).shape(), (Shape{2, 6, 8, 8}));
  EXPECT_THROW(ConvTranspose2d(4, 6, 3, 2, 1, 2, true, gen), ValueError);  // output_padding >= stride
  EXPECT_TRUE(gradcheck_module(up, random_tensor({1, 4, 3, 3}, 5)));
}

TEST(Modules, LayerNormNormalisesTheLastDims) {
  LayerNorm norm(Shape{2, 3});
  EXPECT_EQ(parameter_names(norm), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(norm.weight().to_vector<float>(), std::vector<float>(6, 1.0f));
  EXPECT_EQ(norm.bias().to_vector<float>(), std::vector<float>(6, 0.0f));
  const Tensor y = norm.forward(random_tensor({4, 2, 3}, 6, -2, 3, DType::f32));
  const std::vector<float> v = y.to_vector<float>();
  for (int row = 0; row < 4; ++row) {
    double mean = 0, sq = 0;
    for (int i = 0; i < 6; ++i) mean += v[row * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i) sq += (v[row * 6 + i] - mean) * (v[row * 6 + i] - mean) / 6.0;
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(sq, 1.0, 1e-3);  // biased variance, eps 1e-5
  }
  EXPECT_TRUE(LayerNorm(8, 1e-5, false).named_parameters().empty());
  EXPECT_EQ(parameter_names(LayerNorm(8, 1e-5, true, false)), (std::vector<std::string>{"weight"}));
  LayerNorm last(4);
  EXPECT_TRUE(gradcheck_module(last, random_tensor({2, 3, 4}, 7)));
  EXPECT_THROW(LayerNorm(Shape{}), ValueError);
}

TEST(Modules, GroupNorm) {
  GroupNorm norm(2, 4);
  EXPECT_EQ(norm.weight().shape(), (Shape{4}));
  EXPECT_EQ(norm.forward(random_tensor({2, 4, 3, 3}, 8, -1, 1, DType::f32)).shape(), (Shape{2, 4, 3, 3}));
  EXPECT_THROW(GroupNorm(3, 4), ValueError);
  EXPECT_TRUE(GroupNorm(1, 4, 1e-5, false).named_parameters().empty());
  EXPECT_TRUE(gradcheck_module(norm, random_tensor({2, 4, 2, 2}, 9)));
}

TEST(Modules, EmbeddingLooksUpRowsAndZeroesThePaddingRow) {
  Generator gen(3);
  Embedding emb(5, 3, gen, -1);  // padding_idx 4
  const std::vector<float> w = emb.weight().to_vector<float>();
  EXPECT_EQ(std::vector<float>(w.begin() + 12, w.end()), std::vector<float>(3, 0.0f));
  // N(0, 1): not a uniform in a small interval.
  EXPECT_GT(*std::max_element(w.begin(), w.end()) - *std::min_element(w.begin(), w.end()), 1.0f);
  const Tensor idx = Tensor::from_vector<int64_t>({2, 0, 4, 2}, {2, 2});
  const Tensor y = emb.forward(idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  const std::vector<float> v = y.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(v[c], w[2 * 3 + c]);
    EXPECT_EQ(v[3 + c], w[c]);
    EXPECT_EQ(v[9 + c], w[2 * 3 + c]);
  }
  sum(y).backward();
  const std::vector<float> g = emb.weight().grad().to_vector<float>();
  EXPECT_EQ(g, (std::vector<float>{1, 1, 1, 0, 0, 0, 2, 2, 2, 0, 0, 0, 0, 0, 0}));  // row 4: padding
  EXPECT_THROW(Embedding(5, 3, gen, 5), ValueError);
  Embedding plain(4, 2, gen);
  EXPECT_TRUE(gradcheck_module(plain, Tensor::from_vector<int64_t>({3, 1, 3}, {3})));
}

TEST(Modules, ActivationsMatchKnownValues) {
  const Tensor x = Tensor::from_vector<double>({-4.0, -1.0, 0.0, 1.0, 7.0}, {5});
  auto values = [&](Module&& m) { return m.forward(x).to_vector<double>(); };
  const std::vector<double> gelu_v = values(GELU());
  EXPECT_NEAR(gelu_v[3], 0.8413447460685429, 1e-12);  // 1 * Phi(1)
  EXPECT_NEAR(gelu_v[1], -0.15865525393145707, 1e-12);
  EXPECT_NEAR(values(GELU("tanh"))[3], 0.8411919906082768, 1e-12);
  EXPECT_NEAR(values(SiLU())[3], 0.7310585786300049, 1e-12);
  EXPECT_EQ(values(ReLU6()), (std::vector<double>{0, 0, 0, 1, 6}));
  const std::vector<double> hs = values(Hardswish());
  EXPECT_DOUBLE_EQ(hs[0], 0.0);
  EXPECT_NEAR(hs[1], -1.0 * 2.0 / 6.0, 1e-15);
  EXPECT_NEAR(hs[3], 4.0 / 6.0, 1e-15);
  EXPECT_DOUBLE_EQ(hs[4], 7.0);
  EXPECT_DOUBLE_EQ(values(Sigmoid())[2], 0.5);
  EXPECT_NEAR(values(Tanh())[3], std::tanh(1.0), 1e-15);
  Identity identity;
  EXPECT_TRUE(identity.forward(x).same(x));
  EXPECT_THROW(GELU("fast"), ValueError);

  Sequential chain{std::make_shared<GELU>(), std::make_shared<SiLU>(), std::make_shared<Hardswish>(),
                   std::make_shared<Sigmoid>(), std::make_shared<Tanh>()};
  // Away from the kinks of Hardswish (+-3).
  EXPECT_TRUE(gradcheck_module(chain, random_tensor({2, 5}, 10, -2.5, 2.5)));
}

TEST(Modules, AdaptiveAvgPoolKeepsDimsAndUpsampleResizes) {
  const Tensor x = random_tensor({2, 3, 4, 6}, 11);
  AdaptiveAvgPool2d pool({1});
  const Tensor pooled = pool.forward(x);
  EXPECT_EQ(pooled.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_TRUE(testing::all_close(flatten(pooled, 1), global_avg_pool2d(x), 1e-12, 0));
  EXPECT_EQ(AdaptiveAvgPool2d({2, 3}).forward(x).shape(), (Shape{2, 3, 2, 3}));
  EXPECT_THROW(AdaptiveAvgPool2d({1, 2, 3}), ValueError);

  Upsample nearest({}, {2.0});
  const Tensor small = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
  EXPECT_EQ(nearest.forward(small).to_vector<double>(),
            (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  Upsample bilinear({5, 3}, {}, "bilinear", true);
  EXPECT_EQ(bilinear.forward(x).shape(), (Shape{2, 3, 5, 3}));
  EXPECT_THROW(Upsample({4}, {2.0}), ValueError);
  EXPECT_THROW(Upsample(), ValueError);
  EXPECT_THROW(Upsample({4}, {}, "bicubic"), ValueError);
  Upsample up({}, {2.0}, "bilinear");
  EXPECT_TRUE(gradcheck_module(up, random_tensor({1, 2, 2, 3}, 12)));
}

}  // namespace
}  // namespace liftoff
