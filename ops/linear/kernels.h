// Kernels behind matmul() and linear(): row-major contiguous operands of one dtype, outputs preallocated.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// c[M, N] = op(a) @ op(b), op(t) = t^T when the flag is set (a stored [K, M], b stored [N, K]).
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, const Tensor& c);
// y[rows, cols] += bias[cols].
void bias_add(const Tensor& y, const Tensor& bias);
// gb[cols] = column sums of gy[rows, cols].
void bias_grad(const Tensor& gy, const Tensor& gb);
}  // namespace cpu
namespace cuda {
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, const Tensor& c);
void bias_add(const Tensor& y, const Tensor& bias);
void bias_grad(const Tensor& gy, const Tensor& gb);
}  // namespace cuda
}  // namespace liftoff
