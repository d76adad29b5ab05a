#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// x * factor, elementwise (loss scaling, 1/K for gradient accumulation). f32/f64 on the CPU, also f16/bf16 on
// CUDA (computed in f32). Backward: gx = gy * factor.
Tensor scale(const Tensor& x, double factor);
inline Tensor operator*(const Tensor& x, double factor) {
  return scale(x, factor);
}
inline Tensor operator*(double factor, const Tensor& x) {
  return scale(x, factor);
}

}  // namespace liftoff
