// Own CUDA kernels for channels-last convolutions with few input channels (an image network's first layer:
// 3 colour channels), used by ops/conv2d/cuda.cu for the forward pass and the weight gradient instead of
// cuDNN. cuDNN has no tensor-core kernel for 3 channels: on the strided CNN at 512 px (fp32, batch 128) its
// weight gradient for the 3->16 stem took 2.19 ms of a 9.3 ms step, and its forward 0.55 ms plus a 0.33 ms
// layout conversion, where reading x and gy once is about 0.3 ms on an H100. Both kernels are direct and
// memory-bound: the forward gives each thread one output pixel and 16 filters (four pixels beyond 16
// filters; weights in shared memory); the weight gradient is a tall-skinny product gy^T x patches, tiles of
// pixels staged in shared memory and 4x4 register blocks per thread, then a fixed-order merge of the blocks'
// partials (deterministic, no atomics, no host sync). The input gradient stays with cuDNN (a first layer's
// input needs none). Internal to ops/conv2d (CUDA builds only).
#pragma once
#include "ops/conv2d/kernels.h"

namespace liftoff::cuda::few_channels {

// True when these kernels run conv2d's forward with geometry g in dtype: channels-last, groups 1, at most 4
// input channels, at most 64 filters, C*R*S at most 64 taps, f32/f16/bf16, tensors under 2^31 elements
// (32-bit indexing), and LIFTOFF_FEW_CHANNEL_CONV: auto takes up to 32 filters (the shapes measured faster
// than cuDNN on whole steps), own and forward every shape that fits, cudnn none.
bool applies(const Conv2dShape& g, DType dtype);
// The same for the weight gradient, except that auto takes up to 16 filters and forward none.
bool applies_to_weight_gradient(const Conv2dShape& g, DType dtype);

// y = conv(x, w) (no bias). x, y NHWC; w KRSC.
void forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dShape& g);
// gw[k, r, s, c] = sum over n, oh, ow of gy[n, oh, ow, k] * x[n, oh*stride - p + r*d, ow*stride - p + s*d,
// c].
void backward_weight(const Tensor& x, const Tensor& gy, const Tensor& gw, const Conv2dShape& g);

}  // namespace liftoff::cuda::few_channels
