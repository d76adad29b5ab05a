// Kernels behind max_pool2d(): inputs are checked by the front, contiguous, and outputs allocated.
#pragma once
#include "ops/common/pool_window.h"
#include "runtime/tensor.h"

namespace liftoff {

using MaxPool2dShape = PoolWindow;

namespace cpu {
// y = window maxima; indices (i64, shaped as y) = position of each maximum in its H*W plane.
void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, const MaxPool2dShape& g);
// gx = gy routed to the saved maxima (summed where windows overlap).
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const MaxPool2dShape& g);
}  // namespace cpu
namespace cuda {
void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, const MaxPool2dShape& g);
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const MaxPool2dShape& g);
}  // namespace cuda
}  // namespace liftoff
