#include "models/nn/resnet_imagenet.h"

#include "ops/ops.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

// Sequential(Conv2d(in, out, 1, stride, bias=False), BatchNorm2d(out)) when the shape changes, else null.
std::shared_ptr<Sequential> make_downsample(int64_t in_planes, int64_t out_planes, int64_t stride,
                                            Generator& gen) {
  if (stride == 1 && in_planes == out_planes) return nullptr;
  auto downsample = std::make_shared<Sequential>();
  downsample->push_back(std::make_shared<Conv2d>(in_planes, out_planes, 1, stride, 0, false, gen));
  downsample->push_back(std::make_shared<BatchNorm2d>(out_planes));
  return downsample;
}

}  // namespace

TorchvisionBasicBlock::TorchvisionBasicBlock(int64_t in_planes, int64_t planes, int64_t stride,
                                             Generator& gen) {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_planes, planes, 3, stride, 1, false, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(planes, planes, 3, 1, 1, false, gen));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  if (auto d = make_downsample(in_planes, planes * kExpansion, stride, gen))
    downsample_ = register_module("downsample", d);
}

Tensor TorchvisionBasicBlock::forward(const Tensor& x) {
  const Tensor identity = downsample_ ? downsample_->forward(x) : x;
  Tensor out = relu(bn1_->forward(conv1_->forward(x)));
  out = bn2_->forward(conv2_->forward(out));
  return relu(out + identity);
}

TorchvisionBottleneck::TorchvisionBottleneck(int64_t in_planes, int64_t planes, int64_t stride,
                                             Generator& gen) {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_planes, planes, 1, 1, 0, false, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(planes, planes, 3, stride, 1, false, gen));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  conv3_ =
      register_module("conv3", std::make_shared<Conv2d>(planes, planes * kExpansion, 1, 1, 0, false, gen));
  bn3_ = register_module("bn3", std::make_shared<BatchNorm2d>(planes * kExpansion));
  if (auto d = make_downsample(in_planes, planes * kExpansion, stride, gen))
    downsample_ = register_module("downsample", d);
}

Tensor TorchvisionBottleneck::forward(const Tensor& x) {
  const Tensor identity = downsample_ ? downsample_->forward(x) : x;
  Tensor out = relu(bn1_->forward(conv1_->forward(x)));
  out = relu(bn2_->forward(conv2_->forward(out)));
  out = bn3_->forward(conv3_->forward(out));
  return relu(out + identity);
}

TorchvisionResNet::TorchvisionResNet(Block block, const std::vector<int64_t>& blocks, int64_t in_channels,
                                     int64_t classes, bool imagenet_stem, Generator& gen)
    : imagenet_stem_(imagenet_stem) {
  LIFTOFF_CHECK(blocks.size() == 4, ValueError, "ResNet: blocks must list 4 stages, got ", blocks.size());
  for (const int64_t n : blocks)
    LIFTOFF_CHECK(n >= 1, ValueError, "ResNet: every stage needs at least one block, got ", n);
  conv1_ = register_module("conv1", imagenet_stem
                                        ? std::make_shared<Conv2d>(in_channels, 64, 7, 2, 3, false, gen)
                                        : std::make_shared<Conv2d>(in_channels, 64, 3, 1, 1, false, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(64));
  const int64_t expansion =
      block == Block::basic ? TorchvisionBasicBlock::kExpansion : TorchvisionBottleneck::kExpansion;
  int64_t in_planes = 64;
  for (size_t stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    auto layer = std::make_shared<Sequential>();
    for (int64_t i = 0; i < blocks[stage]; ++i) {
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      if (block == Block::basic)
        layer->push_back(std::make_shared<TorchvisionBasicBlock>(in_planes, planes, stride, gen));
      else
        layer->push_back(std::make_shared<TorchvisionBottleneck>(in_planes, planes, stride, gen));
      in_planes = planes * expansion;
    }
    layers_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
  }
  fc_ = register_module("fc", std::make_shared<Linear>(in_planes, classes, true, gen));
}

Tensor TorchvisionResNet::forward(const Tensor& x) {
  Tensor y = relu(bn1_->forward(conv1_->forward(x)));
  if (imagenet_stem_) y = max_pool2d(y, 3, 2, 1);
  for (const auto& layer : layers_) y = layer->forward(y);
  return fc_->forward(flatten(adaptive_avg_pool2d(y, {1}), 1));
}

}  // namespace liftoff
