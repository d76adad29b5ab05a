#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// y = max(x, 0), elementwise, any shape. Backward: gx = gy * (y > 0).
Tensor relu(const Tensor& x);

}  // namespace liftoff
