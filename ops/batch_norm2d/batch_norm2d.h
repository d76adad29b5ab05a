#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Batch norm over [N, C, H, W] per channel, as PyTorch's F.batch_norm.
// training: normalizes with the batch mean and biased variance, and updates running_mean/running_var in place
//   (running = (1 - momentum) * running + momentum * batch, with the unbiased variance), without autograd;
//   needs more than one value per channel (N*H*W > 1). running_mean/running_var may be undefined here (no
//   update).
// eval: normalizes with running_mean/running_var (both required).
// weight, bias (affine), running_mean, running_var: [C], one dtype: x's dtype, or f32 when x is f16/bf16
// (AMP). x: f32/f64 on the CPU; f32/f64/f16/bf16 on CUDA, statistics always in f32 (f64 for f64 input).
// Backward: gradients for x, weight and bias (with the batch statistics in training, the running ones in
// eval).
// num_batches_tracked: an i64 scalar on x's device that a training call increments (on CUDA inside the
// statistics kernel, not as a launch of its own), or undefined.
Tensor batch_norm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5,
                    const Tensor& num_batches_tracked = Tensor());

// relu(batch_norm2d(x, ...) + residual) in one pass over the output (residual: x's shape, dtype and device,
// or undefined for relu(batch_norm2d(x, ...))). Same values as the three ops for f32/f64; for f16/bf16 the
// sum is rounded once instead of twice. Backward masks with the output and gives residual its gradient.
Tensor batch_norm2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& running_mean, const Tensor& running_var, bool training,
                         double momentum = 0.1, double eps = 1e-5, const Tensor& residual = Tensor(),
                         const Tensor& num_batches_tracked = Tensor());

}  // namespace liftoff
