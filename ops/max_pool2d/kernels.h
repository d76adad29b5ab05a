// Kernels behind max_pool2d(): inputs are checked by the front, contiguous, and outputs allocated.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {

struct MaxPool2dShape {
  int64_t n, c, h, w;  // input
  int64_t oh, ow;      // output
  int64_t kernel, stride, padding;
};

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
