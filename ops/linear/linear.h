#pragma once
#include "ops/matmul/matmul.h"  // matmul() lived here first; existing callers include this header for it
#include "runtime/tensor.h"

namespace liftoff {

// torch.nn.functional.linear: x [..., in] @ weight[out, in]^T + bias[out] -> [..., out]; bias may be
// undefined. x may have any number of leading dims (1-D x gives [out]); they are flattened into the rows of
// one GEMM, a view (no copy) when x is contiguous, and the weight is read transposed in place. Same dtype and
// device for all: f32/f64 on the CPU, f32/f64/f16/bf16 on CUDA (cuBLAS, f32 accumulation, no TF32).
// Autocast: f32 CUDA inputs run in the autocast half dtype (the Linear module passes its cached half
// weights). Backward: gx = gy @ weight, gweight = gy^T @ x, gbias = column sums of gy (over all leading
// dims).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace liftoff
