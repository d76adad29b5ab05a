#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Average pooling over [N, C, H, W] with a square window, as PyTorch's F.avg_pool2d with
// count_include_pad=True (padded zeros count in the divisor).
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding = 0);

}  // namespace liftoff
