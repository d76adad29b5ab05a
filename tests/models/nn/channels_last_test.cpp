// The channels-last switch of the model zoo on the CPU: on by default (it applies to CUDA under f16/bf16
// autocast only), and ignored on the CPU (its kernels are NCHW), so a ResNet gives the same values bit for
// bit with it on.
#include <gtest/gtest.h>

#include "models/nn/zoo.h"
#include "runtime/config.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(ChannelsLastSwitch, OnByDefaultAndSettable) {
  if (!config::is_set(config::Knob::channels_last)) {
    EXPECT_TRUE(channels_last_activations());
  }
  const bool before = channels_last_activations();
  set_channels_last_activations(true);
  EXPECT_TRUE(channels_last_activations());
  set_channels_last_activations(false);
  EXPECT_FALSE(channels_last_activations());
  set_channels_last_activations(before);
}

TEST(ChannelsLastSwitch, IgnoredOnTheCpu) {
  const Tensor x = testing::random_tensor({2, 3, 8, 8}, 5, -1, 1, DType::f32);
  std::vector<Tensor> outputs, grads;
  for (bool on : {false, true}) {
    set_channels_last_activations(on);
    auto model = make_model("resnet20", 3, 10, 8, 11);
    model->train();
    const Tensor y = model->forward(x);
    y.backward(testing::random_tensor(y.shape(), 6, -1, 1, DType::f32));
    outputs.push_back(y);
    grads.push_back(model->parameters().front().grad());
  }
  set_channels_last_activations(true);
  EXPECT_TRUE(testing::all_close(outputs[1], outputs[0], 0, 0));
  EXPECT_TRUE(testing::all_close(grads[1], grads[0], 0, 0));
}

}  // namespace
}  // namespace liftoff
