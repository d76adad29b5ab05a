#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// a + b for tensors of the same shape, dtype and device (residual connections, gradient sums); no
// broadcasting. Floating dtypes: f32/f64 on the CPU, also f16/bf16 on CUDA. Backward: ga = gb = gy.
Tensor add(const Tensor& a, const Tensor& b);
inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}

}  // namespace liftoff
