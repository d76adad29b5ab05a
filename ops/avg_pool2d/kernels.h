// Kernels behind avg_pool2d(): inputs are checked by the front, contiguous, and outputs allocated.
#pragma once
#include "ops/common/pool_window.h"
#include "runtime/tensor.h"

namespace liftoff {

using AvgPool2dShape = PoolWindow;

namespace cpu {
void avg_pool2d_forward(const Tensor& x, const Tensor& y, const AvgPool2dShape& g);
void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const AvgPool2dShape& g);
}  // namespace cpu
namespace cuda {
void avg_pool2d_forward(const Tensor& x, const Tensor& y, const AvgPool2dShape& g);
void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const AvgPool2dShape& g);
}  // namespace cuda
}  // namespace liftoff
