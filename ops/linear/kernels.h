// Kernels behind linear()'s bias (its products are ops/matmul's batched GEMM): row-major contiguous operands
// of one dtype, outputs preallocated.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// y[rows, cols] += bias[cols].
void bias_add(const Tensor& y, const Tensor& bias);
// gb[cols] = column sums of gy[rows, cols].
void bias_grad(const Tensor& gy, const Tensor& gb);
}  // namespace cpu
namespace cuda {
void bias_add(const Tensor& y, const Tensor& bias);
void bias_grad(const Tensor& gy, const Tensor& gb);
}  // namespace cuda
}  // namespace liftoff
