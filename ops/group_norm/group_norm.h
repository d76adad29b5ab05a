#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Group normalisation as PyTorch's F.group_norm(x, num_groups, weight, bias, eps): x [N, C, *] (any number of
// trailing dims, e.g. NCHW); the C channels split into num_groups groups (C divisible by it) and each (image,
// group) is normalised over its C/G * prod(*) values: (x - mean) / sqrt(var + eps), var biased, then
// * weight[c] + bias[c]. weight and bias are [C] or undefined (1 and 0); same dtype and device as x.
// Output: x's shape and dtype. dtypes: CPU f32, f64; CUDA f32, f64, f16/bf16 I/O with f32 statistics.
// Channels-last CUDA input is converted to NCHW for the kernels and the output converted back to
// channels-last (two extra copies; a native NHWC kernel is future work). Autocast: f16/bf16 CUDA input is
// computed in f32 (output f32), as PyTorch. Backward: per (image, group) the layer_norm formula with
// g = gy * weight[c]; gweight[c] = sum over N and * of gy * xhat, gbias[c] = sum of gy (deterministic, no
// atomics). Same kernels as layer_norm (ops/layer_norm/kernels.h).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace liftoff
