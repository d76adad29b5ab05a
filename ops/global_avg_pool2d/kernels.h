// Kernels behind global_avg_pool2d(): inputs are checked by the front and outputs allocated. x / gx are
// contiguous, or (CUDA only) channels-last, which the CUDA kernels read from the strides.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// x [N, C, H, W] -> y [N, C] (plane means); backward gx[n, c, :, :] = gy[n, c] / (H * W).
void global_avg_pool2d_forward(const Tensor& x, const Tensor& y);
void global_avg_pool2d_backward(const Tensor& gy, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void global_avg_pool2d_forward(const Tensor& x, const Tensor& y);
void global_avg_pool2d_backward(const Tensor& gy, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
