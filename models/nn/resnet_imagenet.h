// torchvision's ResNets (He et al. 2016, the "v1.5" variant: a Bottleneck strides in its 3x3 conv), written
// as the PyTorch modules of torchvision.models.resnet, so their state dicts have torchvision's names
// ("layer1.0.conv1.weight", "layer2.0.downsample.0.weight", "fc.bias"). Only public layers and ops: no fused
// batch norm + ReLU, no layout switch (the zoo's CIFAR ResNet in zoo.h has those).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/layers.h"

namespace liftoff {

// BasicBlock (expansion 1): relu(bn2(conv2(relu(bn1(conv1(x))))) + identity), conv1 3x3 with the stride,
// conv2 3x3; identity = downsample(x) = Sequential(Conv2d(in, planes, 1, stride, bias=False),
// BatchNorm2d(planes)) when the stride or the width changes, else x (then no "downsample" child, as PyTorch's
// None).
class TorchvisionBasicBlock : public Module {
 public:
  static constexpr int64_t kExpansion = 1;
  TorchvisionBasicBlock(int64_t in_planes, int64_t planes, int64_t stride, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<Sequential> downsample_;  // null for the identity
};

// Bottleneck (expansion 4): conv1 1x1 (in -> planes), conv2 3x3 with the stride, conv3 1x1 (planes ->
// 4 planes), each followed by batch norm, ReLU after bn1, bn2 and after the residual add; downsample as
// BasicBlock's (to 4 planes).
class TorchvisionBottleneck : public Module {
 public:
  static constexpr int64_t kExpansion = 4;
  TorchvisionBottleneck(int64_t in_planes, int64_t planes, int64_t stride, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Bottleneck"; }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<Sequential> downsample_;
};

// torchvision.models.ResNet: stem conv1, bn1, ReLU (+ maxpool); layer1..layer4 of blocks[i] blocks with 64,
// 128, 256, 512 planes (the first block of layers 2-4 strides 2); adaptive average pool to 1x1; flatten; fc.
// imagenet_stem: conv1 = Conv2d(in, 64, 7, stride 2, padding 3, bias=False) and MaxPool2d(3, 2, 1), as
// torchvision; otherwise the CIFAR stem Conv2d(in, 64, 3, stride 1, padding 1, bias=False) and no max pool.
// Initialisation: the layers' PyTorch defaults (torchvision re-initialises convs with kaiming_normal
// fan_out; not done here).
class TorchvisionResNet : public Module {
 public:
  enum class Block { basic, bottleneck };
  TorchvisionResNet(Block block, const std::vector<int64_t>& blocks, int64_t in_channels, int64_t classes,
                    bool imagenet_stem, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet"; }

 private:
  bool imagenet_stem_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<Sequential>> layers_;
  std::shared_ptr<Linear> fc_;
};

}  // namespace liftoff
