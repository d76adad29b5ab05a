#include "models/nn/layers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

using testing::random_tensor;

void expect_within_bound(const Tensor& t, double bound) {
  const std::vector<double> v = t.to_vector<double>();
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_GE(*lo, -bound);
  EXPECT_LE(*hi, bound);
  // Spread over the whole interval, not a constant or a narrow normal.
  EXPECT_LT(*lo, -0.8 * bound);
  EXPECT_GT(*hi, 0.8 * bound);
}

TEST(Layers, Conv2dShapesAndInit) {
  Generator gen(3);
  Conv2d conv(3, 8, 3, 2, 1, true, gen);
  EXPECT_EQ(conv.weight().shape(), (Shape{8, 3, 3, 3}));
  EXPECT_EQ(conv.bias().shape(), (Shape{8}));
  expect_within_bound(conv.weight(), 1.0 / std::sqrt(27.0));
  expect_within_bound(conv.bias(), 1.0 / std::sqrt(27.0));
  EXPECT_EQ(conv.forward(random_tensor({2, 3, 9, 9}, 1, -1, 1, DType::f32)).shape(), (Shape{2, 8, 5, 5}));

  Conv2d no_bias(3, 4, 1, 1, 0, false, gen);
  EXPECT_FALSE(no_bias.bias().defined());
  EXPECT_EQ(no_bias.named_parameters().size(), 1u);
  EXPECT_THROW(Conv2d(3, 4, 0, 1, 0, false, gen), ValueError);
}

TEST(Layers, InitIsDeterminedBySeed) {
  Generator a(5), b(5), c(6);
  EXPECT_EQ(Linear(10, 4, true, a).weight().to_vector<float>(),
            Linear(10, 4, true, b).weight().to_vector<float>());
  EXPECT_NE(Linear(10, 4, true, a).weight().to_vector<float>(),
            Linear(10, 4, true, c).weight().to_vector<float>());
}

TEST(Layers, LinearShapesAndInit) {
  Generator gen(4);
  Linear fc(200, 30, true, gen);
  EXPECT_EQ(fc.weight().shape(), (Shape{30, 200}));
  expect_within_bound(fc.weight(), 1.0 / std::sqrt(200.0));
  expect_within_bound(fc.bias(), 1.0 / std::sqrt(200.0));
  EXPECT_EQ(fc.forward(Tensor::ones({5, 200})).shape(), (Shape{5, 30}));
}

TEST(Layers, BatchNormStateAndModes) {
  BatchNorm2d bn(4);
  EXPECT_EQ(bn.weight().to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(bn.bias().to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(bn.running_var().to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(bn.num_batches_tracked().dtype(), DType::i64);
  const Tensor x = random_tensor({2, 4, 3, 3}, 2, -1, 3, DType::f32);
  EXPECT_EQ(bn.forward(x).shape(), x.shape());
  bn.forward(x);
  EXPECT_EQ(bn.num_batches_tracked().to_vector<int64_t>(), std::vector<int64_t>{2});
  // The running mean moved toward the batch mean (positive: inputs are in [-1, 3)).
  for (float m : bn.running_mean().to_vector<float>()) EXPECT_GT(m, 0.0f);

  BatchNorm2d fresh(4);
  fresh.eval();
  const std::vector<float> y = fresh.forward(x).to_vector<float>();
  const std::vector<float> xv = x.to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], xv[i] / std::sqrt(1.0 + 1e-5), 1e-6);
  EXPECT_EQ(fresh.num_batches_tracked().to_vector<int64_t>(), std::vector<int64_t>{0});
  EXPECT_EQ(fresh.running_mean().to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(Layers, PoolingFlattenShapesAndValues) {
  const Tensor x =
      Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  EXPECT_EQ(MaxPool2d(2).forward(x).to_vector<float>(), (std::vector<float>{6, 8, 14, 16}));
  EXPECT_EQ(AvgPool2d(2).forward(x).to_vector<float>(), (std::vector<float>{3.5f, 5.5f, 11.5f, 13.5f}));
  EXPECT_EQ(MaxPool2d(3, 1, 1).forward(x).shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(GlobalAvgPool().forward(x).to_vector<float>(), std::vector<float>{8.5f});
  const Tensor y = Tensor::zeros({2, 3, 4, 5});
  EXPECT_EQ(GlobalAvgPool().forward(y).shape(), (Shape{2, 3}));
  EXPECT_EQ(Flatten().forward(y).shape(), (Shape{2, 60}));
  EXPECT_EQ(Flatten(2).forward(y).shape(), (Shape{2, 3, 20}));
  EXPECT_EQ(ReLU().forward(Tensor::from_vector<float>({-1, 2}, {2})).to_vector<float>(),
            (std::vector<float>{0, 2}));
}

TEST(Layers, DropoutTrainEval) {
  Dropout drop(0.5, 11);
  const Tensor x = Tensor::ones({1000});
  const std::vector<float> y = drop.forward(x).to_vector<float>();
  const auto zeros = std::count(y.begin(), y.end(), 0.0f);
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  for (float v : y) EXPECT_TRUE(v == 0.0f || v == 2.0f);
  // Same seed, same masks.
  Dropout twin(0.5, 11);
  EXPECT_EQ(twin.forward(x).to_vector<float>(), y);
  drop.eval();
  EXPECT_EQ(drop.forward(x).to_vector<float>(), std::vector<float>(1000, 1.0f));
  EXPECT_THROW(Dropout(1.5, 0), ValueError);
}

TEST(Layers, SequentialNamesAndOrder) {
  Generator gen(1);
  auto fc = std::make_shared<Linear>(3, 2, true, gen);
  Sequential seq{fc, std::make_shared<ReLU>()};
  EXPECT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq.named_children()[1].first, "1");
  EXPECT_EQ(seq.named_parameters()[0].first, "0.weight");
  EXPECT_EQ(&seq[0], fc.get());
  EXPECT_THROW(seq[2], ValueError);
  // Linear first, then ReLU: no negative outputs.
  const Tensor out = seq.forward(random_tensor({4, 3}, 9, -5, 5, DType::f32));
  EXPECT_EQ(out.shape(), (Shape{4, 2}));
  for (float v : out.to_vector<float>()) EXPECT_GE(v, 0.0f);
  EXPECT_EQ(Sequential().forward(out).to_vector<float>(), out.to_vector<float>());
}

// Gradients of a small network through the modules, in f64 (the modules are converted in place).
TEST(Layers, GradcheckConvBnReluPoolLinear) {
  Generator gen(7);
  Sequential net{std::make_shared<Conv2d>(2, 2, 3, 1, 1, true, gen),
                 std::make_shared<BatchNorm2d>(2),
                 std::make_shared<ReLU>(),
                 std::make_shared<MaxPool2d>(2),
                 std::make_shared<Flatten>(),
                 std::make_shared<Linear>(8, 3, true, gen)};
  net.to(DType::f64);
  std::vector<Tensor> inputs{random_tensor({2, 2, 4, 4}, 3).set_requires_grad(true)};
  for (const auto& p : net.parameters()) inputs.push_back(p);
  EXPECT_TRUE(testing::gradcheck([&](const std::vector<Tensor>& in) { return net.forward(in[0]); }, inputs));
}

TEST(Layers, GradcheckAvgPoolDropoutGlobalPool) {
  Generator gen(8);
  auto drop = std::make_shared<Dropout>(0.3, 21);
  Sequential net{std::make_shared<Conv2d>(2, 3, 3, 1, 0, false, gen), std::make_shared<AvgPool2d>(2), drop,
                 std::make_shared<GlobalAvgPool>(), std::make_shared<Linear>(3, 2, false, gen)};
  net.to(DType::f64);
  std::vector<Tensor> inputs{random_tensor({2, 2, 5, 5}, 4).set_requires_grad(true)};
  for (const auto& p : net.parameters()) inputs.push_back(p);
  // Same dropout mask on every evaluation.
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& in) {
        drop->generator().set_state(21, 0);
        return net.forward(in[0]);
      },
      inputs));
}

}  // namespace
}  // namespace liftoff
