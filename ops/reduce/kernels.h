// Kernels behind sum() and mean(): x contiguous, y a preallocated [] tensor of x's dtype.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// y = factor * sum(x).
void sum_forward(const Tensor& x, double factor, const Tensor& y);
// gx[i] = factor * gy[0], read on the device for CUDA tensors (no host sync).
void sum_backward(const Tensor& gy, double factor, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void sum_forward(const Tensor& x, double factor, const Tensor& y);
void sum_backward(const Tensor& gy, double factor, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
