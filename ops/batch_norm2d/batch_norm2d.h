#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Batch norm over [N, C, H, W] per channel, as PyTorch's F.batch_norm.
// training: normalizes with the batch mean and biased variance, and updates running_mean/running_var in place
//   (running = (1 - momentum) * running + momentum * batch, with the unbiased variance), without autograd.
// eval: normalizes with running_mean/running_var.
// weight, bias: [C] (affine), running_mean, running_var: [C], same dtype as x (f32 under AMP).
Tensor batch_norm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

}  // namespace liftoff
