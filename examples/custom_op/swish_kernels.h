// Kernels behind swish(): inputs are checked by the front, contiguous, and outputs are preallocated.
// grad_beta_elements holds gy * x^2 * s * (1 - s) per element (the front sums it); undefined when beta needs
// no gradient.
#pragma once
#include "runtime/tensor.h"

namespace example {
namespace cpu {
void swish_forward(const liftoff::Tensor& x, const liftoff::Tensor& beta, const liftoff::Tensor& y);
void swish_backward(const liftoff::Tensor& x, const liftoff::Tensor& beta, const liftoff::Tensor& grad_y,
                    const liftoff::Tensor& grad_x, const liftoff::Tensor& grad_beta_elements);
}  // namespace cpu
namespace cuda {
void swish_forward(const liftoff::Tensor& x, const liftoff::Tensor& beta, const liftoff::Tensor& y);
void swish_backward(const liftoff::Tensor& x, const liftoff::Tensor& beta, const liftoff::Tensor& grad_y,
                    const liftoff::Tensor& grad_x, const liftoff::Tensor& grad_beta_elements);
}  // namespace cuda
}  // namespace example
