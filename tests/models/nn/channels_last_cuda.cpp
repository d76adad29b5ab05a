// The runtime chooses the layout, not the model: a conv net written with the public layers (no switch, no
// conversion of its own) runs channels-last from its first convolution under bf16 autocast on CUDA, stays
// NCHW in f32, and both train to the same values within bf16 rounding. ResNet-20 of the zoo likewise.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "models/nn/layers.h"
#include "models/nn/zoo.h"
#include "ops/cast/cast.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "runtime/autocast.h"
#include "runtime/config.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

struct StepResult {
  double loss = 0;
  std::vector<Tensor> grads;                    // per parameter, f32 on the CPU
  std::vector<bool> activations_channels_last;  // user net: after each of its layers
  bool grads_in_parameter_layout = true;
};

std::unique_ptr<Sequential> user_conv_net() {
  Generator gen(17);
  auto net = std::make_unique<Sequential>();
  net->push_back(std::make_shared<Conv2d>(3, 16, 3, 1, 1, false, gen))
      .push_back(std::make_shared<BatchNorm2d>(16))
      .push_back(std::make_shared<ReLU>())
      .push_back(std::make_shared<MaxPool2d>(2))
      .push_back(std::make_shared<Conv2d>(16, 32, 3, 1, 1, true, gen))
      .push_back(std::make_shared<BatchNorm2d>(32))
      .push_back(std::make_shared<ReLU>())
      .push_back(std::make_shared<AvgPool2d>(2))
      .push_back(std::make_shared<Flatten>())
      .push_back(std::make_shared<Linear>(32 * 4 * 4, 10, true, gen));
  return net;
}

// One forward + backward; for a Sequential, the layout after each layer is recorded.
StepResult train_step(Module& model, DType amp, const Tensor& x, const Tensor& labels) {
  model.to(Device::cuda());
  model.train();
  StepResult r;
  Tensor loss;
  {
    AutocastGuard autocast(amp);
    Tensor y = x;
    if (auto* seq = dynamic_cast<Sequential*>(&model)) {
      for (size_t i = 0; i < seq->size(); ++i) {
        y = (*seq)[i].forward(y);
        r.activations_channels_last.push_back(y.dim() == 4 && y.is_channels_last());
      }
    } else {
      y = model.forward(x);
    }
    loss = cross_entropy(cast(y, DType::f32), labels);
  }
  loss.backward();
  r.loss = loss.item();
  for (const Tensor& p : model.parameters()) {
    r.grads.push_back(p.grad().to(Device::cpu(), DType::f32));
    if (p.grad().strides() != p.strides()) r.grads_in_parameter_layout = false;
  }
  return r;
}

double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    diff += (static_cast<double>(va[i]) - vb[i]) * (static_cast<double>(va[i]) - vb[i]);
    norm += static_cast<double>(vb[i]) * vb[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12);
}

// The cosine of the angle between two gradients: about 1 when only rounding separates them, about 0 when a
// layout mix-up scrambled one.
double cosine(const Tensor& a, const Tensor& b) {
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    dot += static_cast<double>(va[i]) * vb[i];
    na += static_cast<double>(va[i]) * va[i];
    nb += static_cast<double>(vb[i]) * vb[i];
  }
  return dot / std::max(std::sqrt(na * nb), 1e-300);
}

struct Batch {
  Tensor x, labels;
};
Batch make_batch(int64_t n, int64_t size) {
  const Device cuda = Device::cuda();
  std::vector<int64_t> label_values(static_cast<size_t>(n));
  for (size_t i = 0; i < label_values.size(); ++i) label_values[i] = static_cast<int64_t>(i * 7 % 10);
  return {testing::random_tensor({n, 3, size, size}, 3, -1, 1, DType::f32).to(cuda),
          Tensor::from_vector(label_values, {n}, cuda)};
}

TEST(RuntimeLayoutCuda, UserConvNetRunsChannelsLastInEveryFloatingDtype) {
  LIFTOFF_REQUIRE_CUDA();
  const Batch b = make_batch(16, 16);
  StepResult nchw;
  {
    config::ScopedSetting input_layout(config::Knob::conv_layout, "input");  // the NCHW reference
    nchw = train_step(*user_conv_net(), DType::f32, b.x, b.labels);
  }
  config::ScopedSetting automatic(config::Knob::conv_layout, "auto");  // whatever the environment says
  const StepResult f32 = train_step(*user_conv_net(), DType::f32, b.x, b.labels);
  const StepResult bf16 = train_step(*user_conv_net(), DType::bf16, b.x, b.labels);
  // LIFTOFF_CONV_LAYOUT=input: NCHW throughout. auto, f32 and bf16: channels-last from the first convolution
  // up to the flatten (the 4-D layers: conv, bn, relu, max pool, conv, bn, relu, avg pool).
  ASSERT_EQ(f32.activations_channels_last.size(), 10u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_FALSE(nchw.activations_channels_last[i]) << "input layout, layer " << i;
    EXPECT_TRUE(f32.activations_channels_last[i]) << "f32 layer " << i;
    EXPECT_TRUE(bf16.activations_channels_last[i]) << "bf16 layer " << i;
  }
  EXPECT_TRUE(f32.grads_in_parameter_layout) << "parameter gradients keep the parameters' (KCRS) layout";
  EXPECT_TRUE(bf16.grads_in_parameter_layout) << "parameter gradients keep the parameters' (KCRS) layout";
  EXPECT_NEAR(f32.loss, nchw.loss, 1e-3 * std::abs(nchw.loss));
  EXPECT_NEAR(bf16.loss, nchw.loss, 2e-2 * std::abs(nchw.loss));
  ASSERT_EQ(bf16.grads.size(), nchw.grads.size());
  ASSERT_EQ(f32.grads.size(), nchw.grads.size());
  // A shallow net: bf16 rounding moves the conv and linear weight gradients by a few percent at most (f32's
  // TF32 convolutions by less); the batch-norm and bias gradients (sums that cancel) by more. A layout mix-up
  // would scramble them (~100%). The second convolution's bias feeds a batch norm: its gradient is zero but
  // for rounding, so it is left out of the comparison.
  for (size_t i = 0; i < nchw.grads.size(); ++i) {
    if (i == 4) continue;
    const double bound = nchw.grads[i].dim() >= 2 ? 0.1 : 0.3;
    EXPECT_LT(relative_difference(f32.grads[i], nchw.grads[i]), bound / 4)
        << "f32 parameter " << i << " " << shape_str(nchw.grads[i].shape());
    EXPECT_LT(relative_difference(bf16.grads[i], nchw.grads[i]), bound)
        << "bf16 parameter " << i << " " << shape_str(nchw.grads[i].shape());
  }
}

// ResNet-20 no longer converts its input itself: the runtime does, and one training step in bf16 is close to
// the f32 (NCHW) step.
TEST(RuntimeLayoutCuda, ResNet20Bf16StepMatchesF32) {
  LIFTOFF_REQUIRE_CUDA();
  const Batch b = make_batch(32, 32);
  const StepResult f32 = train_step(*make_model("resnet20", 3, 10, 32, 11), DType::f32, b.x, b.labels);
  const StepResult bf16 = train_step(*make_model("resnet20", 3, 10, 32, 11), DType::bf16, b.x, b.labels);
  EXPECT_NEAR(bf16.loss, f32.loss, 2e-2 * std::abs(f32.loss));
  EXPECT_TRUE(bf16.grads_in_parameter_layout);
  ASSERT_EQ(bf16.grads.size(), f32.grads.size());
  // Twenty layers of bf16 activations move whole gradients by 30-60% (measured on the H200), but not their
  // direction: a scrambled layout would leave a cosine near 0.
  for (size_t i = 0; i < f32.grads.size(); ++i)
    EXPECT_GT(cosine(bf16.grads[i], f32.grads[i]), 0.7)
        << "parameter " << i << " " << shape_str(f32.grads[i].shape());
}

}  // namespace
}  // namespace liftoff
