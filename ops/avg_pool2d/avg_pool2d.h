#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Average pooling over [N, C, H, W] with a square window, as PyTorch's F.avg_pool2d with
// count_include_pad=True (padded zeros count in the divisor) and floor mode:
// -> [N, C, (H + 2p - kernel)/stride + 1, (W + 2p - kernel)/stride + 1].
// Requires kernel >= 1, stride >= 1 and 0 <= padding <= kernel/2. CPU: f32, f64; CUDA: f32, f64, f16, bf16.
// A channels-last CUDA input gives a channels-last output (and input gradient).
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding = 0);

}  // namespace liftoff
