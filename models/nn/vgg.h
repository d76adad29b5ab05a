// VGG-11 (Simonyan and Zisserman 2014, configuration A) without batch norm, as a researcher writes a plain
// CNN: every 3x3 convolution has a bias and is followed by a ReLU (the pattern ops/conv2d/fusion.h folds).
// Written as torchvision.models.vgg11's features, so the state dict has its names ("features.0.weight", ...).
// Only public layers and ops.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "models/nn/layers.h"

namespace liftoff {

// features = Sequential(Conv2d(in, 64, 3, padding=1), ReLU(), MaxPool2d(2), Conv2d(64, 128), ReLU(),
// MaxPool2d(2), 2 x (Conv2d, ReLU) of 256, MaxPool2d(2), 2 x of 512, MaxPool2d(2), 2 x of 512, MaxPool2d(2));
// then an adaptive average pool to 1x1, flatten, classifier = Linear(512, classes): the CIFAR-style head
// (torchvision's 4096-wide classifier on a 7x7 pool is left out). last_pool false leaves the last max pool
// out, for images of 16 to 31 px (28 px Fashion-MNIST reaches 1x1 after four). Initialisation: PyTorch's
// defaults.
class VGG11 : public Module {
 public:
  VGG11(int64_t in_channels, int64_t classes, bool last_pool, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "VGG11"; }

 private:
  std::shared_ptr<Sequential> features_;
  std::shared_ptr<Linear> classifier_;
};

}  // namespace liftoff
