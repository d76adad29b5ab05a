#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// 2-D cross-correlation as PyTorch's F.conv2d(x, weight, bias, stride, padding, dilation, groups):
// x [N, C, H, W], weight [K, C/groups, R, S], bias [K] or undefined, square stride, zero padding and dilation
// -> [N, K, (H + 2p - d(R-1) - 1)/stride + 1, (W + 2p - d(S-1) - 1)/stride + 1]. groups splits C and K into
// independent convolutions (both divisible by it); groups == C is a depthwise convolution.
// x, weight and bias share dtype and device. CPU: f32, f64. CUDA (cuDNN): f32 (TF32 allowed, as PyTorch),
// f64, f16/bf16 with f32 accumulation; channels-last input stays channels-last (grouped ones too).
// Requires stride, dilation >= 1 and 0 <= padding < d(R-1)+1, d(S-1)+1 (a window made only of padding is
// almost always a mistake; PyTorch allows it). Differentiable in x, weight and bias. Not autocast here:
// models/nn's Conv2d casts to the half dtype. Differences from PyTorch: square stride/padding/dilation only,
// no padding="same" strings.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);

}  // namespace liftoff
