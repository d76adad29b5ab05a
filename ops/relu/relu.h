#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// y = max(x, 0), elementwise, any shape. f32/f64 on the CPU, also f16/bf16 on CUDA.
// Backward: gx = gy * (y > 0).
Tensor relu(const Tensor& x);

}  // namespace liftoff
