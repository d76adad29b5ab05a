#include "models/nn/zoo.h"

#include <string>

#include "ops/ops.h"
#include "runtime/error.h"

namespace liftoff {

SimpleCNN::SimpleCNN(int64_t in_channels, int64_t classes, int64_t image_size, Generator& gen) {
  LIFTOFF_CHECK(image_size >= 4, ValueError, "simple_cnn: image_size must be >= 4 (two 2x2 max pools), got ",
                image_size);
  const int64_t pooled = image_size / 2 / 2;
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_channels, 32, 3, 1, 1, true, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(32));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(32, 64, 3, 1, 1, true, gen));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(64));
  fc1_ = register_module("fc1", std::make_shared<Linear>(64 * pooled * pooled, 128, true, gen));
  fc2_ = register_module("fc2", std::make_shared<Linear>(128, classes, true, gen));
}

Tensor SimpleCNN::forward(const Tensor& x) {
  Tensor y = max_pool2d(relu(bn1_->forward(conv1_->forward(x))), 2, 2);
  y = max_pool2d(relu(bn2_->forward(conv2_->forward(y))), 2, 2);
  y = relu(fc1_->forward(flatten(y, 1)));
  return fc2_->forward(y);
}

StridedCNN::StridedCNN(int64_t in_channels, int64_t classes, Generator& gen, bool fused_bn_relu)
    : fused_(fused_bn_relu) {
  int64_t in = in_channels;
  for (const int64_t out : {16, 32, 64}) {
    const std::string index = std::to_string(convs_.size() + 1);
    convs_.push_back(register_module("conv" + index, std::make_shared<Conv2d>(in, out, 3, 2, 1, false, gen)));
    norms_.push_back(register_module("bn" + index, std::make_shared<BatchNorm2d>(out)));
    in = out;
  }
  fc_ = register_module("fc", std::make_shared<Linear>(in, classes, true, gen));
}

Tensor StridedCNN::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < convs_.size(); ++i) {
    y = convs_[i]->forward(y);
    y = fused_ ? norms_[i]->forward_relu(y) : relu(norms_[i]->forward(y));
  }
  return fc_->forward(global_avg_pool2d(y));
}

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, Generator& gen, bool fused_bn_relu)
    : fused_(fused_bn_relu) {
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_planes, planes, 3, stride, 1, false, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(planes, planes, 3, 1, 1, false, gen));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  shortcut_ = register_module("shortcut", std::make_shared<Sequential>());
  if (stride != 1 || in_planes != planes) {
    shortcut_->push_back(std::make_shared<Conv2d>(in_planes, planes, 1, stride, 0, false, gen));
    shortcut_->push_back(std::make_shared<BatchNorm2d>(planes));
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  if (fused_) {
    const Tensor y = bn1_->forward_relu(conv1_->forward(x));
    return bn2_->forward_relu(conv2_->forward(y), shortcut_->forward(x));
  }
  Tensor y = relu(bn1_->forward(conv1_->forward(x)));
  y = bn2_->forward(conv2_->forward(y));
  return relu(add(y, shortcut_->forward(x)));
}

ResNet::ResNet(int64_t blocks_per_stage, int64_t in_channels, int64_t classes, Generator& gen,
               bool fused_bn_relu)
    : fused_(fused_bn_relu) {
  LIFTOFF_CHECK(blocks_per_stage >= 1, ValueError, "ResNet: blocks per stage must be >= 1, got ",
                blocks_per_stage);
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_channels, 16, 3, 1, 1, false, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(16));
  int64_t in_planes = 16;
  auto stage = [&](int64_t planes, int64_t stride) {
    auto layer = std::make_shared<Sequential>();
    for (int64_t i = 0; i < blocks_per_stage; ++i) {
      layer->push_back(std::make_shared<BasicBlock>(in_planes, planes, i == 0 ? stride : 1, gen, fused_));
      in_planes = planes;
    }
    return layer;
  };
  layer1_ = register_module("layer1", stage(16, 1));
  layer2_ = register_module("layer2", stage(32, 2));
  layer3_ = register_module("layer3", stage(64, 2));
  fc_ = register_module("fc", std::make_shared<Linear>(64, classes, true, gen));
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor y = fused_ ? bn1_->forward_relu(conv1_->forward(x)) : relu(bn1_->forward(conv1_->forward(x)));
  y = layer3_->forward(layer2_->forward(layer1_->forward(y)));
  return fc_->forward(global_avg_pool2d(y));
}

ResNet9::ConvBn ResNet9::conv_bn(const std::string& name, int64_t in, int64_t out, Generator& gen) {
  ConvBn layer{std::make_shared<Conv2d>(in, out, 3, 1, 1, false, gen), std::make_shared<BatchNorm2d>(out)};
  auto sequence = std::make_shared<Sequential>();
  sequence->push_back(layer.conv).push_back(layer.bn);
  register_module(name, sequence);
  return layer;
}

Tensor ResNet9::apply(const ConvBn& layer, const Tensor& x) {
  return layer.bn->forward_relu(layer.conv->forward(x));
}

ResNet9::ResNet9(int64_t in_channels, int64_t classes, Generator& gen) {
  prep_ = conv_bn("prep", in_channels, 64, gen);
  layer1_ = conv_bn("layer1", 64, 128, gen);
  res1a_ = conv_bn("res1a", 128, 128, gen);
  res1b_ = conv_bn("res1b", 128, 128, gen);
  layer2_ = conv_bn("layer2", 128, 256, gen);
  layer3_ = conv_bn("layer3", 256, 512, gen);
  res3a_ = conv_bn("res3a", 512, 512, gen);
  res3b_ = conv_bn("res3b", 512, 512, gen);
  fc_ = register_module("fc", std::make_shared<Linear>(512, classes, false, gen));
}

Tensor ResNet9::forward(const Tensor& x) {
  LIFTOFF_CHECK(x.dim() == 4 && x.shape()[2] == x.shape()[3] && x.shape()[2] >= 8, ShapeError,
                "ResNet9: expects square images of side >= 8 as [N, C, H, W] (three 2x2 max pools), got ",
                shape_str(x.shape()), "; resize the images (--image-size) or pick a ResNet (any size)");
  Tensor y = apply(prep_, x);
  y = max_pool2d(apply(layer1_, y), 2, 2);
  y = add(y, apply(res1b_, apply(res1a_, y)));
  y = max_pool2d(apply(layer2_, y), 2, 2);
  y = max_pool2d(apply(layer3_, y), 2, 2);
  y = add(y, apply(res3b_, apply(res3a_, y)));
  y = max_pool2d(y, y.shape()[2], y.shape()[2]);  // global max pool, as AdaptiveMaxPool2d(1)
  // Page's output scale: the logits of a freshly initialised net stay small, so early steps are not wasted.
  return scale(fc_->forward(flatten(y, 1)), 0.125);
}

std::vector<std::string> model_names() {
  return {"simple_cnn", "strided_cnn", "resnet9",  "resnet20",     "resnet32", "resnet44",
          "resnet56",   "resnet18",    "resnet50", "mobilenet_v2", "vit_tiny", "vgg11"};
}

std::unique_ptr<Module> make_model(const std::string& name, int64_t in_channels, int64_t classes,
                                   int64_t image_size, uint64_t seed) {
  LIFTOFF_CHECK(in_channels >= 1 && classes >= 1 && image_size >= 1, ValueError, "make_model(\"", name,
                "\"): in_channels, classes and image_size must be positive, got ", in_channels, ", ", classes,
                ", ", image_size);
  Generator gen(seed);
  if (name == "simple_cnn") return std::make_unique<SimpleCNN>(in_channels, classes, image_size, gen);
  if (name == "strided_cnn") return std::make_unique<StridedCNN>(in_channels, classes, gen);
  if (name == "resnet9") {
    LIFTOFF_CHECK(image_size >= 8, ValueError, "resnet9: image_size must be >= 8 (three 2x2 max pools), got ",
                  image_size);
    return std::make_unique<ResNet9>(in_channels, classes, gen);
  }
  const std::pair<const char*, int64_t> resnets[] = {
      {"resnet20", 3}, {"resnet32", 5}, {"resnet44", 7}, {"resnet56", 9}};
  for (const auto& [resnet, n] : resnets) {
    if (name == resnet) return std::make_unique<ResNet>(n, in_channels, classes, gen);
  }
  const bool small = image_size < 64;  // CIFAR-style stems and patches below 64 px (zoo.h)
  using Block = TorchvisionResNet::Block;
  if (name == "resnet18")
    return std::make_unique<TorchvisionResNet>(Block::basic, std::vector<int64_t>{2, 2, 2, 2}, in_channels,
                                               classes, !small, gen);
  if (name == "resnet50")
    return std::make_unique<TorchvisionResNet>(Block::bottleneck, std::vector<int64_t>{3, 4, 6, 3},
                                               in_channels, classes, !small, gen);
  if (name == "mobilenet_v2") return std::make_unique<MobileNetV2>(in_channels, classes, small, gen);
  if (name == "vit_tiny")
    return std::make_unique<VisionTransformer>(in_channels, classes, image_size, small ? 4 : 16, 192, 6, 3,
                                               768, gen);
  if (name == "vgg11") {
    LIFTOFF_CHECK(image_size >= 16, ValueError,
                  "vgg11: image_size must be >= 16 (at least four 2x2 max pools), got ", image_size);
    return std::make_unique<VGG11>(in_channels, classes, image_size >= 32, gen);
  }
  std::string known;
  for (const auto& m : model_names()) known += (known.empty() ? "" : ", ") + m;
  throw ValueError(str_cat("unknown model \"", name, "\"; known models: ", known));
}

}  // namespace liftoff
