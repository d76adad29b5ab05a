// Kernels behind scale(): x contiguous, y preallocated with x's shape and dtype.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void scale_forward(const Tensor& x, double factor, const Tensor& y);
}  // namespace cpu
namespace cuda {
void scale_forward(const Tensor& x, double factor, const Tensor& y);
}  // namespace cuda
}  // namespace liftoff
