#include "models/train/optim.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/optimizer_step/optimizer_step.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Two updates with fixed gradients; expected values from torch.optim (1.13) on the same numbers in f64.
const std::vector<double> kStart{1.0, -2.0, 0.5};
const std::vector<std::vector<double>> kGrads{{0.5, -1.0, 0.25}, {-0.3, 0.2, 1.0}};

Tensor param() {
  return Tensor::from_vector<double>(kStart, {3}).set_requires_grad(true);
}

void expect_near(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  const std::vector<double> v = t.to_vector<double>();
  ASSERT_EQ(v.size(), expected.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], expected[i], tol) << "element " << i;
}

void run_two_steps(Optimizer& opt, const Tensor& p, const std::vector<double>& after1,
                   const std::vector<double>& after2) {
  p.set_grad(Tensor::from_vector<double>(kGrads[0], {3}));
  opt.step();
  expect_near(p, after1);
  p.set_grad(Tensor::from_vector<double>(kGrads[1], {3}));
  opt.step();
  expect_near(p, after2);
}

TEST(Optim, SgdMomentumWeightDecay) {
  const Tensor p = param();
  SGD opt({p}, 0.1, 0.9, 0.01);
  // Step 1: g' = g + 0.01 p = [0.51, -1.02, 0.255]; buf = g'; p -= 0.1 buf.
  run_two_steps(opt, p, {0.949, -1.898, 0.4745}, {0.932151, -1.824302, 0.3510755});
  const NamedTensors state = opt.named_state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "momentum_buffer.0");
}

TEST(Optim, SgdNesterov) {
  const Tensor p = param();
  SGD opt({p}, 0.1, 0.9, 0.01, true);
  run_two_steps(opt, p, {0.9031, -1.8062, 0.45155}, {0.91707411, -1.75814822, 0.240037055});
}

TEST(Optim, SgdPlainHasNoState) {
  const Tensor p = param();
  SGD opt({p}, 0.1);
  run_two_steps(opt, p, {0.95, -1.9, 0.475}, {0.98, -1.92, 0.375});
  EXPECT_TRUE(opt.named_state().empty());
  EXPECT_THROW(SGD({p}, 0.1, 0.0, 0.0, true), ValueError);
  EXPECT_THROW(SGD({p}, -1.0), ValueError);
}

TEST(Optim, AdamW) {
  const Tensor p = param();
  AdamW opt({p}, 0.01, 0.9, 0.999, 1e-8, 0.1);
  // Step 1: p *= 1 - 0.001; m_hat = g, v_hat = g^2, so p -= 0.01 * g / (|g| + 1e-8).
  run_two_steps(opt, p, {0.9890000002, -1.9880000001, 0.4895000004},
                {0.9860960198939775, -1.9809017393989494, 0.4801667356151488});
  const NamedTensors state = opt.named_state();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "exp_avg.0");
  EXPECT_EQ(state[1].first, "exp_avg_sq.0");
  EXPECT_EQ(state[2].first, "step.0");
  EXPECT_EQ(state[2].second.to_vector<int64_t>(), std::vector<int64_t>{2});
  // exp_avg after two steps: 0.9 * 0.1 g1 + 0.1 g2.
  expect_near(state[0].second, {0.09 * 0.5 - 0.03, 0.09 * -1.0 + 0.02, 0.09 * 0.25 + 0.1});
}

TEST(Optim, SkipsParametersWithoutGradient) {
  const Tensor a = param();
  const Tensor b = param();
  AdamW adam({a, b}, 0.01);
  a.set_grad(Tensor::from_vector<double>(kGrads[0], {3}));
  adam.step();
  expect_near(b, kStart, 0.0);
  const std::vector<double> a_after_first = a.to_vector<double>();
  EXPECT_NE(a_after_first, kStart);
  EXPECT_EQ(adam.named_state()[5].second.to_vector<int64_t>(), std::vector<int64_t>{0});     // step.1
  EXPECT_EQ(adam.named_state()[4].second.to_vector<double>(), std::vector<double>(3, 0.0));  // exp_avg_sq.1
  // b's first update comes at the optimizer's second step, yet is an update number 1 (own bias correction):
  // it must equal a's first update exactly. a has no gradient now and stays put.
  adam.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  b.set_grad(Tensor::from_vector<double>(kGrads[0], {3}));
  adam.step();
  expect_near(b, a_after_first, 0.0);
  expect_near(a, a_after_first, 0.0);
  EXPECT_EQ(adam.named_state()[2].second.to_vector<int64_t>(), std::vector<int64_t>{1});  // step.0
  EXPECT_EQ(adam.named_state()[5].second.to_vector<int64_t>(), std::vector<int64_t>{1});  // step.1

  const Tensor c = param();
  SGD sgd({c}, 0.1, 0.9);
  sgd.step();
  expect_near(c, kStart, 0.0);
  EXPECT_EQ(sgd.named_state()[0].second.to_vector<double>(), std::vector<double>(3, 0.0));
}

TEST(Optim, LearningRateAndStateDevice) {
  const Tensor p = Tensor::zeros({2, 2}).set_requires_grad(true);
  SGD opt({p}, 0.5, 0.9);
  EXPECT_EQ(opt.lr(), 0.5);
  opt.set_lr(0.25);
  p.set_grad(Tensor::ones({2, 2}));
  opt.step();
  EXPECT_EQ(p.to_vector<float>(), std::vector<float>(4, -0.25f));
  EXPECT_EQ(opt.named_state()[0].second.device(), p.device());
  EXPECT_EQ(opt.named_state()[0].second.dtype(), DType::f32);
  EXPECT_THROW(opt.set_lr(-1), ValueError);
}

// Channels-last parameters (Module::to(MemoryFormat), the Trainer on CUDA): the fused steps pair parameter,
// gradient and state storage element by element, so states made before the layout changed follow it, a
// gradient in another layout is converted, and every value matches the same step on contiguous parameters.
void expect_same_steps(const std::function<std::unique_ptr<Optimizer>(const Tensor&)>& make) {
  const Tensor start = testing::random_tensor({4, 3, 2, 5}, 11, -1, 1, DType::f32);
  const Tensor plain = start.clone().set_requires_grad(true);
  const Tensor laid_out = start.clone().set_requires_grad(true);
  auto plain_opt = make(plain);
  auto laid_out_opt = make(laid_out);  // states made while the parameter is still contiguous
  set_memory_format_in_place(laid_out, MemoryFormat::channels_last);
  ASSERT_TRUE(laid_out.is_channels_last());
  for (int step = 0; step < 3; ++step) {
    const Tensor g = testing::random_tensor({4, 3, 2, 5}, 20 + step, -1, 1, DType::f32);
    plain.set_grad(g.clone());
    // Odd steps hand the channels-last parameter a contiguous gradient.
    laid_out.set_grad(step % 2 ? g.clone() : g.contiguous(MemoryFormat::channels_last));
    plain_opt->step();
    laid_out_opt->step();
    EXPECT_TRUE(laid_out.is_channels_last());
    EXPECT_TRUE(testing::all_close(laid_out, plain, 0, 0)) << "step " << step;
  }
  for (const auto& [name, state] : laid_out_opt->named_state()) {
    EXPECT_TRUE(state.dim() != 4 || state.is_channels_last()) << name;
  }
}

TEST(Optim, ChannelsLastParametersStepAsContiguousOnes) {
  expect_same_steps(
      [](const Tensor& p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, 0.1, 0.9, 0.01); });
  expect_same_steps(
      [](const Tensor& p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, 0.1, 0.9, 0.0, true); });
  expect_same_steps([](const Tensor& p) {
    return std::make_unique<AdamW>(std::vector<Tensor>{p}, 1e-2, 0.9, 0.999, 1e-8, 0.01);
  });
}

// A state that is dense in another layout than its parameter is refused by the fused step itself (a caller
// of sgd_step without the optimizer classes), naming the state and the parameter.
TEST(Optim, FusedStepRefusesAStateInAnotherLayout) {
  const Tensor p =
      testing::random_tensor({2, 3, 4, 4}, 3, -1, 1, DType::f32).contiguous(MemoryFormat::channels_last);
  const Tensor g = testing::random_tensor({2, 3, 4, 4}, 4, -1, 1, DType::f32);
  SgdHyper hyper;
  hyper.lr = 0.1;
  hyper.momentum = 0.9;
  try {
    sgd_step({p}, {g}, {Tensor::zeros({2, 3, 4, 4})}, hyper, Tensor());
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("layout of parameter"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace liftoff
