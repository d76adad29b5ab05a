#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// a [M, K] @ b [K, N] -> [M, N]. Same dtype and device: f32/f64 on the CPU (Eigen), f32/f64/f16/bf16 on CUDA
// (cuBLAS; f32 accumulation for every float type but f64, and no TF32, like PyTorch's default).
// Backward: ga = gy @ b^T, gb = a^T @ gy.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [N, in] @ weight[out, in]^T + bias[out] -> [N, out]; bias may be undefined. Same dtypes/devices as
// matmul. Backward: gx = gy @ weight, gweight = gy^T @ x, gbias = column sums of gy.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace liftoff
