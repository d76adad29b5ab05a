// Own CUDA kernels for depthwise convolutions in channels-last memory (groups == C == K, dilation 1, kernels
// up to 7x7, any stride and padding), used by ops/conv2d/cuda.cu instead of cuDNN, whose grouped kernels
// were about 3x slower on MobileNetV2's depthwise layers. Memory-bound direct kernels: threads own V
// consecutive channels (16-byte vectors when C and the pointers allow) and stride over pixels; 3x3 kernels
// are unrolled with their weights in registers. The weight gradient is a 2-D reduction (channel tiles x
// pixel splits, a fixed tree per block, then a fixed-order merge of the splits): deterministic, no atomics,
// no host sync, scratch from the caching allocator. Internal to ops/conv2d (CUDA builds only).
#pragma once
#include "ops/conv2d/kernels.h"

namespace liftoff::cuda::depthwise {

// True when these kernels run conv2d with geometry g in dtype: channels-last, groups == C == K (multiplier
// 1), dilation 1, R and S in [1, 7], f32/f16/bf16, tensors under 2^30 elements (32-bit indexing), and
// LIFTOFF_DEPTHWISE is not `cudnn`.
bool applies(const Conv2dShape& g, DType dtype);

// y = depthwise conv(x, w) (no bias). x, y NHWC; w [C, 1, R, S].
void forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dShape& g);
// gx = the transposed depthwise conv of gy: each input pixel gathers the outputs that read it.
void backward_data(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dShape& g);
// gw[c, 0, r, s] = sum over n, oh, ow of gy[n, oh, ow, c] * x[n, oh*stride - p + r, ow*stride - p + s, c].
void backward_weight(const Tensor& x, const Tensor& gy, const Tensor& gw, const Conv2dShape& g);

}  // namespace liftoff::cuda::depthwise
