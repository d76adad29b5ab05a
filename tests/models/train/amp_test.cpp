#include "models/train/amp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/linear/linear.h"
#include "ops/reduce/reduce.h"
#include "ops/scale/scale.h"

namespace liftoff {
namespace {

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// loss = sum(x @ w^T): dloss/dw = column sums of x, so the true gradient is known exactly.
struct TinyModel {
  Tensor w =
      Tensor::from_vector<float>({0.5f, -1.f, 2.f, 0.25f, 1.5f, -0.75f}, {2, 3}).set_requires_grad(true);
  Tensor x = Tensor::from_vector<float>({1.f, 2.f, -3.f, 0.5f, -1.f, 4.f}, {2, 3});
  std::vector<float> true_grad() const { return {1.5f, 1.f, 1.f, 1.5f, 1.f, 1.f}; }
  Tensor loss() const { return sum(linear(x, w)); }
};

void plant_inf(const Tensor& param) {
  param.grad().data<float>()[1] = std::numeric_limits<float>::infinity();
}

TEST(AmpMode, ParsesTheThreeModes) {
  EXPECT_EQ(parse_amp("off"), AmpMode::off);
  EXPECT_EQ(parse_amp("bf16"), AmpMode::bf16);
  EXPECT_EQ(parse_amp("fp16"), AmpMode::fp16);
  EXPECT_STREQ(amp_mode_name(AmpMode::fp16), "fp16");
  EXPECT_EQ(amp_compute_dtype(AmpMode::bf16), DType::bf16);
  EXPECT_EQ(amp_compute_dtype(AmpMode::fp16), DType::f16);
  EXPECT_EQ(amp_compute_dtype(AmpMode::off), DType::f32);
  try {
    parse_amp("fp32");
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("off, bf16, fp16"), std::string::npos) << e.what();
  }
}

TEST(GradScaler, PyTorchDefaultsAndState) {
  GradScaler scaler;
  EXPECT_TRUE(scaler.enabled());
  EXPECT_TRUE(scaler.is_dynamic());
  EXPECT_EQ(scaler.current_scale(), 65536.0);
  EXPECT_EQ(scaler.options().growth_factor, 2.0);
  EXPECT_EQ(scaler.options().backoff_factor, 0.5);
  EXPECT_EQ(scaler.options().growth_interval, 2000);
  const NamedTensors state = scaler.named_state();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "scale");
  EXPECT_EQ(state[1].first, "growth_tracker");
  EXPECT_EQ(state[2].first, "skipped_steps");
  // A checkpoint loader writes into the live tensors.
  state[0].second.copy_(Tensor::full({1}, 1024.0));
  EXPECT_EQ(scaler.current_scale(), 1024.0);
}

TEST(GradScaler, ScaledBackwardThenUnscaleGivesTrueGradients) {
  TinyModel m;
  GradScaler scaler;
  const Tensor scaled = scaler.scale(m.loss());
  EXPECT_EQ(scaled.item(), 65536.0 * m.loss().item());
  scaled.backward();
  EXPECT_EQ(m.w.grad().to_vector<float>()[0], 65536.f * 1.5f);
  scaler.unscale_(std::vector<Tensor>{m.w.grad()});
  EXPECT_EQ(m.w.grad().to_vector<float>(), m.true_grad());
  EXPECT_EQ(scaler.found_inf().item(), 0.0);
}

// Gradient accumulation: K micro-batches of scale(loss / K).backward(), one unscale: the mean gradient.
TEST(GradScaler, AccumulatedMicroBatches) {
  TinyModel m;
  GradScaler scaler;
  for (int k = 0; k < 4; ++k) scaler.scale(scale(m.loss(), 0.25)).backward();
  SGD opt({m.w}, 1.0);
  scaler.unscale_(opt);
  EXPECT_EQ(m.w.grad().to_vector<float>(), m.true_grad());
}

TEST(GradScaler, InfSkipsTheStepAndHalvesTheScale) {
  for (bool adamw : {false, true}) {
    TinyModel m;
    const Tensor other = Tensor::from_vector<float>({1.f, 2.f}, {2}).set_requires_grad(true);
    std::unique_ptr<Optimizer> opt;
    if (adamw) {
      opt = std::make_unique<AdamW>(std::vector<Tensor>{m.w, other}, 0.1);
    } else {
      opt = std::make_unique<SGD>(std::vector<Tensor>{m.w, other}, 0.1, 0.9, 1e-4);
    }
    // One clean step so the optimizer state is non-trivial.
    GradScaler scaler;
    scaler.scale(m.loss()).backward();
    other.set_grad(Tensor::full({2}, 65536.0));
    scaler.step(*opt);
    scaler.update();
    opt->zero_grad();
    EXPECT_EQ(scaler.growth_tracker().item(), 1.0);

    std::vector<Tensor> before;
    for (const Tensor& p : {m.w, other}) before.push_back(p.clone());
    NamedTensors state_before;
    for (const auto& [name, t] : opt->named_state()) state_before.emplace_back(name, t.clone());

    scaler.scale(m.loss()).backward();
    other.set_grad(Tensor::full({2}, 65536.0));
    plant_inf(other);  // only one of the gradients is bad
    scaler.step(*opt);
    scaler.update();
    EXPECT_EQ(scaler.found_inf().item(), 1.0);
    EXPECT_TRUE(bit_identical(m.w, before[0])) << "adamw " << adamw;
    EXPECT_TRUE(bit_identical(other, before[1]));
    const NamedTensors state_after = opt->named_state();
    for (size_t i = 0; i < state_after.size(); ++i) {  // AdamW's step counts included: a skipped step is none
      EXPECT_TRUE(bit_identical(state_after[i].second, state_before[i].second)) << state_after[i].first;
    }
    EXPECT_EQ(scaler.current_scale(), 32768.0);
    EXPECT_EQ(scaler.growth_tracker().item(), 0.0);
    EXPECT_EQ(scaler.skipped_steps().item(), 1.0);

    // The next clean step updates again, with the new scale.
    opt->zero_grad();
    scaler.scale(m.loss()).backward();
    EXPECT_EQ(m.w.grad().to_vector<float>()[0], 32768.f * 1.5f);
    scaler.step(*opt);
    scaler.update();
    EXPECT_FALSE(bit_identical(m.w, before[0]));
    EXPECT_EQ(scaler.skipped_steps().item(), 1.0);
  }
}

TEST(GradScaler, GrowsAfterGrowthIntervalCleanSteps) {
  TinyModel m;
  SGD opt({m.w}, 1e-3);
  GradScalerOptions options;
  options.init_scale = 8.0;
  options.growth_interval = 3;
  GradScaler scaler(Device::cpu(), options);
  const auto clean_step = [&] {
    scaler.scale(m.loss()).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
  };
  clean_step();
  clean_step();
  EXPECT_EQ(scaler.current_scale(), 8.0);
  clean_step();
  EXPECT_EQ(scaler.current_scale(), 16.0);
  EXPECT_EQ(scaler.growth_tracker().item(), 0.0);
  clean_step();
  clean_step();
  EXPECT_EQ(scaler.current_scale(), 16.0);
  clean_step();
  EXPECT_EQ(scaler.current_scale(), 32.0);
  EXPECT_EQ(scaler.skipped_steps().item(), 0.0);
}

TEST(GradScaler, StaticScaleNeverChangesButStillSkips) {
  TinyModel m;
  SGD opt({m.w}, 1e-3);
  GradScaler scaler = GradScaler::fixed(128.0);
  EXPECT_FALSE(scaler.is_dynamic());
  const Tensor w0 = m.w.clone();
  scaler.scale(m.loss()).backward();
  plant_inf(m.w);
  scaler.step(opt);
  scaler.update();
  EXPECT_TRUE(bit_identical(m.w, w0));
  EXPECT_EQ(scaler.current_scale(), 128.0);
  EXPECT_EQ(scaler.skipped_steps().item(), 1.0);
  // More clean steps than the default growth interval: still 128.
  for (int i = 0; i < 2001; ++i) {
    opt.zero_grad();
    scaler.scale(m.loss()).backward();
    scaler.step(opt);
    scaler.update();
  }
  EXPECT_EQ(scaler.current_scale(), 128.0);
  EXPECT_EQ(scaler.skipped_steps().item(), 1.0);
  EXPECT_FALSE(bit_identical(m.w, w0));
}

TEST(GradScaler, ForModeBf16IsDisabled) {
  TinyModel m;
  SGD opt({m.w}, 0.5);
  GradScaler scaler = GradScaler::for_mode(AmpMode::bf16, Device::cpu());
  EXPECT_FALSE(scaler.enabled());
  EXPECT_EQ(scaler.current_scale(), 1.0);
  const Tensor loss = m.loss();
  EXPECT_TRUE(scaler.scale(loss).same(loss));
  loss.backward();
  scaler.unscale_(opt);
  EXPECT_EQ(m.w.grad().to_vector<float>(), m.true_grad());
  scaler.step(opt);  // a plain optimizer step
  scaler.update();
  EXPECT_EQ(m.w.to_vector<float>()[0], 0.5f - 0.5f * 1.5f);
  EXPECT_FALSE(GradScaler::for_mode(AmpMode::off, Device::cpu()).enabled());
  EXPECT_TRUE(GradScaler::for_mode(AmpMode::fp16, Device::cpu()).is_dynamic());
  const GradScaler fixed = GradScaler::for_mode(AmpMode::fp16, Device::cpu(), 1024.0);
  EXPECT_FALSE(fixed.is_dynamic());
  EXPECT_EQ(fixed.current_scale(), 1024.0);
}

TEST(GradScaler, HalfLossIsScaledInF32) {
  GradScaler scaler;
  const Tensor loss = Tensor::full({}, 2.0, DType::f16);
  const Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.dtype(), DType::f32);
  EXPECT_EQ(scaled.item(), 131072.0);  // beyond f16's range
}

// An optimizer without a device-side skip still skips, through the base class's host read.
class CountingOptimizer : public Optimizer {
 public:
  explicit CountingOptimizer(std::vector<Tensor> params) : Optimizer(std::move(params), 0.1) {}
  void step() override { ++steps; }
  NamedTensors named_state() const override { return {}; }
  int steps = 0;
};

TEST(GradScaler, CustomOptimizerSkipsThroughHostRead) {
  TinyModel m;
  CountingOptimizer opt({m.w});
  GradScaler scaler;
  scaler.scale(m.loss()).backward();
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(opt.steps, 1);
  scaler.scale(m.loss()).backward();
  plant_inf(m.w);
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(opt.steps, 1);
}

TEST(GradScaler, RejectsMisuse) {
  TinyModel m;
  SGD opt({m.w}, 0.1);
  GradScaler scaler;
  EXPECT_THROW(scaler.update(), ValueError);  // nothing checked yet
  scaler.scale(m.loss()).backward();
  scaler.unscale_(opt);
  EXPECT_THROW(scaler.unscale_(opt), ValueError);
  scaler.step(opt);
  EXPECT_THROW(scaler.step(opt), ValueError);
  EXPECT_THROW(scaler.unscale_(opt), ValueError);
  scaler.update();
  EXPECT_THROW(scaler.scale(Tensor()), ValueError);
  GradScalerOptions bad;
  bad.growth_factor = 1.0;
  EXPECT_THROW(GradScaler(Device::cpu(), bad), ValueError);
  bad = GradScalerOptions();
  bad.backoff_factor = 1.0;
  EXPECT_THROW(GradScaler(Device::cpu(), bad), ValueError);
  bad = GradScalerOptions();
  bad.growth_interval = 0;
  EXPECT_THROW(GradScaler(Device::cpu(), bad), ValueError);
  EXPECT_THROW(GradScaler::fixed(0.0), ValueError);
  EXPECT_THROW(GradScaler::for_mode(AmpMode::fp16, Device::cpu(), -1.0), ValueError);
}

}  // namespace
}  // namespace liftoff
