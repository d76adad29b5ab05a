#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Mean over H and W: [N, C, H, W] -> [N, C].
Tensor global_avg_pool2d(const Tensor& x);

}  // namespace liftoff
