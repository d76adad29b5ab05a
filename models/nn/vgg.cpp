#include "models/nn/vgg.h"

#include "ops/ops.h"

namespace liftoff {

VGG11::VGG11(int64_t in_channels, int64_t classes, bool last_pool, Generator& gen) {
  features_ = register_module("features", std::make_shared<Sequential>());
  constexpr int64_t kPool = 0;  // a 2x2 max pool in the configuration below
  int64_t channels = in_channels;
  int64_t pools = last_pool ? 5 : 4;
  for (const int64_t width : {int64_t{64}, kPool, int64_t{128}, kPool, int64_t{256}, int64_t{256}, kPool,
                              int64_t{512}, int64_t{512}, kPool, int64_t{512}, int64_t{512}, kPool}) {
    if (width == kPool) {
      if (pools-- > 0) features_->push_back(std::make_shared<MaxPool2d>(2, 2));
      continue;
    }
    features_->push_back(std::make_shared<Conv2d>(channels, width, 3, 1, 1, true, gen));
    features_->push_back(std::make_shared<ReLU>());
    channels = width;
  }
  classifier_ = register_module("classifier", std::make_shared<Linear>(channels, classes, true, gen));
}

Tensor VGG11::forward(const Tensor& x) {
  const Tensor y = features_->forward(x);
  return classifier_->forward(flatten(adaptive_avg_pool2d(y, {1}), 1));
}

}  // namespace liftoff
