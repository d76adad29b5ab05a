#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Mean over H and W: [N, C, H, W] -> [N, C] (H, W >= 1). CPU: f32, f64; CUDA: f32, f64, f16, bf16 (f32
// accumulation).
Tensor global_avg_pool2d(const Tensor& x);

}  // namespace liftoff
