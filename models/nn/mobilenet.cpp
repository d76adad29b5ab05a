#include "models/nn/mobilenet.h"

#include "ops/ops.h"
#include "runtime/error.h"

namespace liftoff {

std::shared_ptr<Sequential> conv_bn_relu6(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                          int64_t stride, int64_t groups, Generator& gen) {
  auto block = std::make_shared<Sequential>();
  block->push_back(std::make_shared<Conv2d>(in_channels, out_channels, kernel, stride, (kernel - 1) / 2,
                                            false, gen, 1, groups));
  block->push_back(std::make_shared<BatchNorm2d>(out_channels));
  block->push_back(std::make_shared<ReLU6>());
  return block;
}

InvertedResidual::InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio,
                                   Generator& gen)
    : use_res_connect_(stride == 1 && inp == oup) {
  LIFTOFF_CHECK(stride == 1 || stride == 2, ValueError, "InvertedResidual: stride must be 1 or 2, got ",
                stride);
  const int64_t hidden = inp * expand_ratio;
  conv_ = register_module("conv", std::make_shared<Sequential>());
  if (expand_ratio != 1) conv_->push_back(conv_bn_relu6(inp, hidden, 1, 1, 1, gen));
  conv_->push_back(conv_bn_relu6(hidden, hidden, 3, stride, hidden, gen));
  conv_->push_back(std::make_shared<Conv2d>(hidden, oup, 1, 1, 0, false, gen));
  conv_->push_back(std::make_shared<BatchNorm2d>(oup));
}

Tensor InvertedResidual::forward(const Tensor& x) {
  return use_res_connect_ ? x + conv_->forward(x) : conv_->forward(x);
}

MobileNetV2::MobileNetV2(int64_t in_channels, int64_t classes, bool cifar_stride, Generator& gen) {
  struct Stage {
    int64_t t, c, n, s;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  const int64_t last_channel = 1280;
  features_ = register_module("features", std::make_shared<Sequential>());
  int64_t channels = 32;
  features_->push_back(conv_bn_relu6(in_channels, channels, 3, cifar_stride ? 1 : 2, 1, gen));
  for (const Stage& stage : stages) {
    for (int64_t i = 0; i < stage.n; ++i) {
      features_->push_back(
          std::make_shared<InvertedResidual>(channels, stage.c, i == 0 ? stage.s : 1, stage.t, gen));
      channels = stage.c;
    }
  }
  features_->push_back(conv_bn_relu6(channels, last_channel, 1, 1, 1, gen));
  classifier_ = register_module("classifier", std::make_shared<Sequential>());
  classifier_->push_back(std::make_shared<Dropout>(0.2, draw_seed(gen)));
  classifier_->push_back(std::make_shared<Linear>(last_channel, classes, true, gen));
}

Tensor MobileNetV2::forward(const Tensor& x) {
  const Tensor y = features_->forward(x);
  return classifier_->forward(flatten(adaptive_avg_pool2d(y, {1}), 1));
}

}  // namespace liftoff
