#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Max pooling over [N, C, H, W] with a square window, as PyTorch's F.max_pool2d (padding counts as -inf).
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding = 0);

}  // namespace liftoff
