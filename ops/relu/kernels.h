// Kernels behind relu(): inputs are checked by the front, outputs allocated; all tensors dense in one layout
// (contiguous, or channels-last on CUDA): the kernels run over the storage linearly.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void relu_forward(const Tensor& x, const Tensor& y);
void relu_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);
}  // namespace cpu
namespace cuda {
void relu_forward(const Tensor& x, const Tensor& y);
void relu_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);
}  // namespace cuda
}  // namespace liftoff
