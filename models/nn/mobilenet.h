// MobileNetV2 (Sandler et al. 2018) at width 1.0, written as torchvision.models.mobilenetv2's PyTorch
// modules, so the state dict has torchvision's names ("features.1.conv.0.0.weight", "classifier.1.weight").
// Only public layers and ops.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "models/nn/layers.h"

namespace liftoff {

// torchvision's Conv2dNormActivation with ReLU6: Sequential(Conv2d(in, out, k, stride, (k-1)/2, bias=False,
// groups), BatchNorm2d(out), ReLU6()).
std::shared_ptr<Sequential> conv_bn_relu6(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                          int64_t stride, int64_t groups, Generator& gen);

// InvertedResidual(inp, oup, stride, expand_ratio): conv = Sequential([conv_bn_relu6(inp, hidden, 1) when
// expand_ratio != 1], conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden) (depthwise),
// Conv2d(hidden, oup, 1, bias=False), BatchNorm2d(oup)) with hidden = inp * expand_ratio; x + conv(x) when
// stride == 1 and inp == oup, else conv(x).
class InvertedResidual : public Module {
 public:
  InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "InvertedResidual"; }

 private:
  bool use_res_connect_;
  std::shared_ptr<Sequential> conv_;
};

// MobileNetV2: features = Sequential(conv_bn_relu6(in, 32, 3, stride s0), 17 InvertedResiduals with
// (t, c, n, s) = (1,16,1,1) (6,24,2,2) (6,32,3,2) (6,64,4,2) (6,96,3,1) (6,160,3,2) (6,320,1,1),
// conv_bn_relu6(320, 1280, 1)); adaptive average pool to 1x1; flatten; classifier = Sequential(Dropout(0.2),
// Linear(1280, classes)). s0 = 2 as torchvision, or 1 when cifar_stride (for images smaller than 64 px, the
// usual CIFAR adaptation: 32 px then reach the last stage at 2x2 instead of 1x1). Initialisation: the layers'
// PyTorch defaults (torchvision re-initialises convs with kaiming_normal fan_out and the Linear with
// N(0, 0.01); not done here). The dropout's seed is drawn from gen.
class MobileNetV2 : public Module {
 public:
  MobileNetV2(int64_t in_channels, int64_t classes, bool cifar_stride, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MobileNetV2"; }

 private:
  std::shared_ptr<Sequential> features_, classifier_;
};

}  // namespace liftoff
