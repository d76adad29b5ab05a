#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Transposed 2-D convolution (the adjoint of conv2d, "deconvolution") as PyTorch's
// F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation):
// x [N, Cin, H, W], weight [Cin, Cout/groups, kH, kW], bias [Cout] or undefined ->
// [N, Cout, (H-1)*stride - 2*padding + dilation*(kH-1) + output_padding + 1, (same for W)].
// Cin divisible by groups. Square stride, padding, output_padding, dilation. The output is the input gradient
// of conv2d(y, weight, stride, padding, dilation, groups) given gradient x: CUDA runs cuDNN's backward-data
// convolution, the CPU conv2d's backward path (col2im). Backward: gx = conv2d(gy, weight) (a forward
// convolution), gweight = conv2d's weight gradient with the roles of x and y swapped, gbias = sum of gy over
// N, H, W. dtypes: CPU f32, f64; CUDA f32 (TF32 allowed), f64, f16/bf16 (f32 accumulation). Layout as conv2d
// (conv2d_memory_format): channels-last on CUDA under autocast or for a channels-last input (f64:
// contiguous). Adds its FLOPs to a live FlopCounter. Autocast: f32 CUDA inputs run in the half dtype
// (output half), as PyTorch's conv_transpose2d. Difference from PyTorch: output_padding must be smaller than
// stride (PyTorch also accepts output_padding < dilation, which is not a conv2d adjoint).
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        int64_t stride = 1, int64_t padding = 0, int64_t output_padding = 0,
                        int64_t groups = 1, int64_t dilation = 1);

}  // namespace liftoff
