#pragma once
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace liftoff {

// x converted to `dtype` on x's device (any shape, any strides; the result is contiguous, or channels-last
// for a channels-last CUDA tensor), differentiable: backward casts the gradient back to x's dtype. Returns x
// itself (same handle, same graph) when the dtypes match. Casting to an integer dtype is allowed but records
// no gradient, as in PyTorch. Float conversions round to nearest even; f32 -> f16 overflows to inf beyond
// 65504.
Tensor cast(const Tensor& x, DType dtype);

}  // namespace liftoff
