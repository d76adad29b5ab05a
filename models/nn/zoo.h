// Model zoo: the models `train` can build by name. Module names match the PyTorch code in the comments, so
// state dicts are interchangeable with PyTorch's (tools/reference/golden_resnet20.py builds the same ResNet).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/layers.h"
#include "models/nn/mobilenet.h"
#include "models/nn/resnet_imagenet.h"
#include "models/nn/vgg.h"
#include "models/nn/vit.h"

namespace liftoff {

// A small CNN for 28x28-class inputs. As PyTorch:
//   conv1 = Conv2d(in, 32, 3, padding=1); bn1 = BatchNorm2d(32)   -> ReLU -> MaxPool2d(2)
//   conv2 = Conv2d(32, 64, 3, padding=1); bn2 = BatchNorm2d(64)   -> ReLU -> MaxPool2d(2)
//   flatten; fc1 = Linear(64 * (s/2/2)^2, 128) -> ReLU; fc2 = Linear(128, classes)
// (s = image_size, floor divisions; 64*7*7 for 28). No dropout: batch norm regularises enough at this size,
// and the model stays deterministic in training mode.
class SimpleCNN : public Module {
 public:
  SimpleCNN(int64_t in_channels, int64_t classes, int64_t image_size, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SimpleCNN"; }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<Linear> fc1_, fc2_;
};

// A light CNN for large images (e.g. 224 px folders): three stride-2 stages cut the pixels 64x before the
// pool, so the cost per image stays small at any size. As PyTorch:
//   conv1 = Conv2d(in, 16, 3, stride=2, padding=1, bias=False); bn1 = BatchNorm2d(16)  -> ReLU
//   conv2 = Conv2d(16, 32, 3, stride=2, padding=1, bias=False); bn2 = BatchNorm2d(32)  -> ReLU
//   conv3 = Conv2d(32, 64, 3, stride=2, padding=1, bias=False); bn3 = BatchNorm2d(64)  -> ReLU
//   AdaptiveAvgPool2d(1); flatten; fc = Linear(64, classes)
// fused_bn_relu: each BN + ReLU as one op (batch_norm2d_relu; see ResNet).
class StridedCNN : public Module {
 public:
  StridedCNN(int64_t in_channels, int64_t classes, Generator& gen, bool fused_bn_relu = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "StridedCNN"; }

 private:
  std::vector<std::shared_ptr<Conv2d>> convs_;
  std::vector<std::shared_ptr<BatchNorm2d>> norms_;
  std::shared_ptr<Linear> fc_;
  bool fused_;
};

// He et al. 2016's CIFAR basic block: conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU.
// The shortcut is an empty Sequential (identity) or, when the stride or the width changes, the projection
// Sequential(Conv2d(in, out, 1, stride, bias=False), BatchNorm2d(out)) ("shortcut.0", "shortcut.1").
// fused_bn_relu: as ResNet's.
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, Generator& gen, bool fused_bn_relu = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<Sequential> shortcut_;
  bool fused_;
};

// CIFAR ResNet-(6n+2): conv1 (3x3, 16, no bias), bn1, ReLU; layer1/2/3 = n BasicBlocks of 16/32/64 channels
// (the first block of layer2 and layer3 with stride 2 and a projection shortcut); global average pool; fc.
// fused_bn_relu: batch norm + (residual add +) ReLU as one op (batch_norm2d_relu): fewer passes and kernel
// launches, same values in f32/f64; the default, measured faster on CUDA (fewer graph nodes) and on the CPU
// (1.04x with the AVX-512 batch-norm kernels; docs/perf.md). false: separate batch_norm2d, add, relu, as a
// model written with the public API would. Memory layout is the runtime's choice (channels-last under
// autocast on CUDA, ops/conv2d/conv2d.h), not the model's.
class ResNet : public Module {
 public:
  ResNet(int64_t blocks_per_stage, int64_t in_channels, int64_t classes, Generator& gen,
         bool fused_bn_relu = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet"; }

 private:
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<Sequential> layer1_, layer2_, layer3_;
  std::shared_ptr<Linear> fc_;
  bool fused_;
};

// David Page's ResNet-9 (Myrtle.ai's DAWNBench CIFAR-10 entry, 2018): few, wide layers, so a step is a
// handful of large convolutions instead of many small ones (at 28 px 8.8x ResNet-20's FLOPs in 8
// convolutions, not 21). conv_bn(a, b) = Conv2d(a, b, 3, padding=1, bias=False) -> BatchNorm2d(b) -> ReLU. As
// PyTorch (tools/reference/resnet_cifar.py, ResNet9):
//   prep = conv_bn(in, 64)
//   layer1 = conv_bn(64, 128) -> MaxPool2d(2);  x = x + res1b(res1a(x)), res1a/res1b = conv_bn(128, 128)
//   layer2 = conv_bn(128, 256) -> MaxPool2d(2)
//   layer3 = conv_bn(256, 512) -> MaxPool2d(2); x = x + res3b(res3a(x)), res3a/res3b = conv_bn(512, 512)
//   global max pool (AdaptiveMaxPool2d(1)); flatten; fc = Linear(512, classes, bias=False); logits * 0.125
// Each conv_bn is a Sequential ("<name>.0" the conv, "<name>.1" the batch norm). Needs an image side >= 8
// (three 2x2 pools); inputs must be square.
class ResNet9 : public Module {
 public:
  ResNet9(int64_t in_channels, int64_t classes, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet9"; }

 private:
  struct ConvBn {
    std::shared_ptr<Conv2d> conv;
    std::shared_ptr<BatchNorm2d> bn;
  };
  ConvBn conv_bn(const std::string& name, int64_t in, int64_t out, Generator& gen);
  static Tensor apply(const ConvBn& layer, const Tensor& x);

  ConvBn prep_, layer1_, res1a_, res1b_, layer2_, layer3_, res3a_, res3b_;
  std::shared_ptr<Linear> fc_;
};

// The names make_model knows: simple_cnn, strided_cnn, resnet9, resnet20, resnet32, resnet44, resnet56,
// resnet18, resnet50, mobilenet_v2, vit_tiny, vgg11.
std::vector<std::string> model_names();

// Builds a model by name, initialised from Generator(seed). image_size is the side of the (square) input;
// simple_cnn needs it (>= 4), resnet9 >= 8, the ResNets accept any size (global pooling). Throws ValueError
// for an unknown name (listing the known ones) or bad sizes. The torchvision-style models (resnet_imagenet.h,
// mobilenet.h, vit.h) adapt to small images, with image_size < 64 counting as small:
//   resnet18, resnet50: torchvision's ResNet-18/50; small: the CIFAR stem (3x3 conv, stride 1, no max pool),
//     else the ImageNet stem (7x7/2 conv + 3x3/2 max pool).
//   mobilenet_v2: torchvision's MobileNetV2 (width 1.0); small: the first conv strides 1 instead of 2.
//   vit_tiny: VisionTransformer with dim 192, depth 6, 3 heads, MLP 768; patch 4 when small, else 16;
//     image_size must be a multiple of the patch, and the model then takes only that size.
//   vgg11: VGG-11 without batch norm (vgg.h: convolutions with a bias, each followed by a ReLU) and a
//     global-pool head; image_size >= 16, the last max pool left out below 32.
std::unique_ptr<Module> make_model(const std::string& name, int64_t in_channels, int64_t classes,
                                   int64_t image_size, uint64_t seed);

}  // namespace liftoff
