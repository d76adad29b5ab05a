#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// x * factor, elementwise (loss scaling, 1/K for gradient accumulation).
Tensor scale(const Tensor& x, double factor);
inline Tensor operator*(const Tensor& x, double factor) { return scale(x, factor); }
inline Tensor operator*(double factor, const Tensor& x) { return scale(x, factor); }

}  // namespace liftoff
