#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// 2-D cross-correlation as PyTorch's F.conv2d(x, weight, bias, stride, padding, dilation, groups):
// x [N, C, H, W], weight [K, C/groups, R, S], bias [K] or undefined, square stride, zero padding and dilation
// -> [N, K, (H + 2p - d(R-1) - 1)/stride + 1, (W + 2p - d(S-1) - 1)/stride + 1]. groups splits C and K into
// independent convolutions (both divisible by it); groups == C is a depthwise convolution.
// x, weight and bias share dtype and device. CPU: f32, f64. CUDA (cuDNN): f32 (TF32 allowed, as PyTorch),
// f64, f16/bf16 with f32 accumulation; channels-last depthwise convolutions (groups == C == K, dilation 1,
// kernels up to 7x7) run Liftoff's own deterministic kernels instead (LIFTOFF_DEPTHWISE=cudnn: cuDNN).
// Requires stride, dilation >= 1 and 0 <= padding < d(R-1)+1, d(S-1)+1 (a window made only of padding is
// almost always a mistake; PyTorch allows it). Differentiable in x, weight and bias. Autocast: f32 CUDA
// inputs run in the autocast half dtype (PyTorch's autocast list); models/nn's Conv2d passes its cached half
// weights instead. Layout (the runtime's choice, conv2d_memory_format): on CUDA in f32, f16 and bf16 the
// output is channels-last (NHWC) whatever the input's layout, so cuDNN can use its NHWC engines (and our NHWC
// batch-norm and depthwise kernels follow); an NCHW input is converted once here (differentiably: its
// gradient comes back channels-last) and the layout-aware ops after it keep NHWC. LIFTOFF_CONV_LAYOUT=input
// keeps the input's layout; f64 and the CPU compute NCHW. Values do not depend on the layout. Adds its
// forward FLOPs to a live FlopCounter (runtime/profile/flops.h). Differences from PyTorch: square
// stride/padding/dilation only, no padding="same" strings; PyTorch keeps an NCHW input NCHW.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);

// The layout conv2d (and conv_transpose2d) computes and returns for input x: channels_last for a 4-D CUDA
// input (not f64; LIFTOFF_CONV_LAYOUT=input: the input's own), contiguous otherwise. Modules cache their half
// weights in it (models/nn Conv2d), so no per-call weight conversion is needed under autocast.
MemoryFormat conv2d_memory_format(const Tensor& x);

}  // namespace liftoff
