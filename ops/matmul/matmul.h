#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// torch.matmul. Shapes: 1-D x 1-D is the dot product (-> []); 2-D x 2-D the matrix product [M, K] @ [K, N]
// -> [M, N]; a 1-D first operand is treated as [1, K] and a 1-D second operand as [K, 1], and the added dim
// is removed from the result; N-D operands [..., M, K] @ [..., K, N] multiply matrix by matrix with their
// batch dims (all but the last two) broadcast: [2, 1, M, K] @ [3, K, N] -> [2, 3, M, N]. Operands may be any
// strided views: transposed matrices (permute/transpose of the last two dims) are passed to the GEMM as
// transposes, not copied. Both operands must have one floating dtype and one device: f32/f64 on the CPU
// (Eigen), f32/f64/ f16/bf16 on CUDA (cuBLAS strided-batched GEMM; f32 accumulation for halves; no TF32, as
// PyTorch's default). Autocast: f32 CUDA operands run in the autocast half dtype. Backward: ga = gy @ b^T, gb
// = a^T @ gy, each summed over the batch dims its operand was broadcast along. Differences from PyTorch: no
// integer dtypes and no mixed-dtype operands (a DTypeError instead of a promotion).
Tensor matmul(const Tensor& a, const Tensor& b);

// torch.bmm: a [B, M, K] @ b [B, K, N] -> [B, M, N], both strictly 3-D with equal B (no broadcasting: use
// matmul for that). Dtypes, devices, autocast and backward as matmul.
Tensor bmm(const Tensor& a, const Tensor& b);

}  // namespace liftoff
