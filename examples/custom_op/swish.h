// swish: an op written outside Liftoff, laid out like the library's own ops (ops/relu/): this header is the
// API, swish.cpp the device-independent front (checks, dispatch, autograd), swish_kernels.h the kernels'
// declarations, swish_cpu.cpp and swish_cuda.cu the kernels.
#pragma once
#include "runtime/tensor.h"

namespace example {

// y = x * sigmoid(beta * x), elementwise, any shape (Swish with a learnable slope; beta = 1 is SiLU).
// x: f32 or f64, on the CPU or (in a CUDA-enabled build) a CUDA device. beta: one element, same dtype and
// device as x; it is read on the device, so no host synchronisation happens. Differentiable in both:
//   gx = gy * (s + beta * x * s * (1 - s)),   gbeta = sum(gy * x^2 * s * (1 - s)),   s = sigmoid(beta * x).
liftoff::Tensor swish(const liftoff::Tensor& x, const liftoff::Tensor& beta);

}  // namespace example
