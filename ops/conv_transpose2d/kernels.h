// Kernels of conv_transpose2d() beyond conv2d's (ops/conv2d/kernels.h runs the convolutions themselves).
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// y[n, c, ...] += bias[c]; y contiguous NCHW.
void conv_transpose2d_add_bias(const Tensor& y, const Tensor& bias);
}  // namespace cpu
namespace cuda {
// y[n, c, ...] += bias[c]; y contiguous NCHW or channels-last NHWC.
void conv_transpose2d_add_bias(const Tensor& y, const Tensor& bias);
}  // namespace cuda
}  // namespace liftoff
