#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Differentiable reshape (a view when x is contiguous, a copy otherwise); one -1 infers a dimension.
Tensor reshape(const Tensor& x, const Shape& shape);
// Collapses dimensions start_dim..end into one: [N, C, H, W] -> [N, C*H*W] for start_dim 1.
Tensor flatten(const Tensor& x, int64_t start_dim = 1);

}  // namespace liftoff
