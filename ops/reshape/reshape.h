#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Differentiable reshape (a view sharing x's storage when x is contiguous, a copy otherwise); one -1 infers a
// dimension. Any dtype and device. Backward reshapes the gradient back to x's shape.
Tensor reshape(const Tensor& x, const Shape& shape);
// Collapses dimensions start_dim..end into one: [N, C, H, W] -> [N, C*H*W] for start_dim 1. Negative
// start_dim counts from the end; a 0-d tensor flattens to [1].
Tensor flatten(const Tensor& x, int64_t start_dim = 1);

}  // namespace liftoff
