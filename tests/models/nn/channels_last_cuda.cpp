// ResNet-20 with channels-last activations (LIFTOFF_CHANNELS_LAST / set_channels_last_activations) trains the
// same as with NCHW activations: one training step, f32 and bf16 autocast, same loss, gradients and
// batch-norm statistics within the tolerance of the two layouts' different cuDNN algorithms.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/autocast.h"
#include "models/nn/zoo.h"
#include "ops/cast/cast.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "tests/common/cuda_test.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

struct StepResult {
  double loss = 0;
  std::vector<Tensor> grads;    // per parameter, f32 on the CPU
  std::vector<Tensor> buffers;  // running statistics, f32 on the CPU
};

StepResult train_step(bool channels_last, DType amp, const Tensor& x, const Tensor& labels) {
  const bool before = channels_last_activations();
  set_channels_last_activations(channels_last);
  auto model = make_model("resnet20", 3, 10, 32, 11);
  model->to(Device::cuda());
  model->train();
  Tensor loss;
  {
    AutocastGuard autocast(amp);
    const Tensor logits = model->forward(x);
    loss = cross_entropy(cast(logits, DType::f32), labels);
  }
  loss.backward();
  StepResult r;
  r.loss = loss.item();
  for (const Tensor& p : model->parameters()) r.grads.push_back(p.grad().to(Device::cpu(), DType::f32));
  for (const Tensor& b : model->buffers())
    if (is_floating(b.dtype())) r.buffers.push_back(b.to(Device::cpu(), DType::f32));
  set_channels_last_activations(before);
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

TEST(ChannelsLastModel, ResNet20StepMatchesNchw) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda();
  const Tensor x = testing::random_tensor({32, 3, 32, 32}, 3, -1, 1, DType::f32).to(cuda);
  std::vector<int64_t> label_values(32);
  for (size_t i = 0; i < label_values.size(); ++i) label_values[i] = static_cast<int64_t>(i * 7 % 10);
  const Tensor labels = Tensor::from_vector(label_values, {32}, cuda);
  // f32 ignores the switch (NHWC measured slower there): the same step (up to cuDNN algorithms that sum in
  // varying order).
  const StepResult f32_nchw = train_step(false, DType::f32, x, labels);
  const StepResult f32_nhwc = train_step(true, DType::f32, x, labels);
  EXPECT_NEAR(f32_nhwc.loss, f32_nchw.loss, 1e-5 * std::abs(f32_nchw.loss));
  ASSERT_EQ(f32_nhwc.grads.size(), f32_nchw.grads.size());
  for (size_t i = 0; i < f32_nchw.grads.size(); ++i)
    EXPECT_LT(relative_difference(f32_nhwc.grads[i], f32_nchw.grads[i]), 1e-3) << "f32 parameter " << i;

  // bf16: rounding every activation to 8 bits moves the deep layers' gradients (batch-norm weight gradients
  // cancel heavily) by several percent in either layout, so each layout is measured against the f32 step:
  // channels-last must be about as close to it as NCHW is.
  const StepResult bf16_nchw = train_step(false, DType::bf16, x, labels);
  const StepResult bf16_nhwc = train_step(true, DType::bf16, x, labels);
  EXPECT_NEAR(bf16_nhwc.loss, f32_nchw.loss, 2e-2 * std::abs(f32_nchw.loss));
  ASSERT_EQ(bf16_nhwc.grads.size(), f32_nchw.grads.size());
  for (size_t i = 0; i < f32_nchw.grads.size(); ++i) {
    const double nchw_error = relative_difference(bf16_nchw.grads[i], f32_nchw.grads[i]);
    const double nhwc_error = relative_difference(bf16_nhwc.grads[i], f32_nchw.grads[i]);
    EXPECT_TRUE(bf16_nhwc.grads[i].is_contiguous()) << "parameter " << i;
    EXPECT_LT(nhwc_error, std::max(2.0 * nchw_error, 2e-2))
        << "bf16 parameter " << i << " " << shape_str(f32_nchw.grads[i].shape()) << ": NCHW is off by "
        << nchw_error;
  }
  for (size_t i = 0; i < f32_nchw.buffers.size(); ++i) {
    const double nchw_error = relative_difference(bf16_nchw.buffers[i], f32_nchw.buffers[i]);
    const double nhwc_error = relative_difference(bf16_nhwc.buffers[i], f32_nchw.buffers[i]);
    EXPECT_LT(nhwc_error, std::max(2.0 * nchw_error, 2e-2))
        << "bf16 buffer " << i << ": NCHW is off by " << nchw_error;
  }
}

}  // namespace
}  // namespace liftoff
