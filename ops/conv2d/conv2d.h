#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// 2-D cross-correlation as PyTorch's F.conv2d: x [N, C, H, W], weight [K, C, R, S], bias [K] or undefined,
// square stride and zero padding -> [N, K, (H + 2p - R)/stride + 1, (W + 2p - S)/stride + 1].
// x, weight and bias share dtype and device. CPU: f32, f64. CUDA (cuDNN): f32 (TF32 allowed, as PyTorch),
// f64, f16/bf16 with f32 accumulation. Requires stride >= 1 and 0 <= padding < R, S (a window made only of
// padding is almost always a mistake). Differentiable in x, weight and bias.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride = 1,
              int64_t padding = 0);

}  // namespace liftoff
