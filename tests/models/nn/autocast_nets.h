// The small conv net and random inputs of the autocast layer tests (autocast_weight_cast_cuda.cpp,
// autocast_grad_cast_cuda.cpp): every kind of weight autocast copies (3x3 stem, 3x3 with bias, 1x1,
// depthwise 3x3, linear), for 8x8 input.
#pragma once
#include <memory>
#include <random>
#include <vector>

#include "models/nn/layers.h"
#include "runtime/tensor.h"

namespace liftoff::testing {

inline std::unique_ptr<Sequential> autocast_conv_net(uint64_t seed) {
  Generator gen(seed);
  auto net = std::make_unique<Sequential>();
  net->push_back(std::make_shared<Conv2d>(3, 16, 3, 1, 1, false, gen))
      .push_back(std::make_shared<Conv2d>(16, 32, 3, 1, 1, true, gen))
      .push_back(std::make_shared<Conv2d>(32, 64, 1, 1, 0, false, gen))
      .push_back(std::make_shared<Conv2d>(64, 64, 3, 1, 1, false, gen, 1, 64))
      .push_back(std::make_shared<AvgPool2d>(2))
      .push_back(std::make_shared<Flatten>())
      .push_back(std::make_shared<Linear>(64 * 4 * 4, 10, true, gen));
  net->to(Device::cuda());
  return net;
}

// Normal values (sigma 0.3) on the first CUDA device.
inline Tensor random_cuda(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = normal(gen);
  return Tensor::from_vector(v, shape, Device::cuda());
}

}  // namespace liftoff::testing
